"""Server-Sent Events, sans I/O: an incremental decoder and an encoder.

The decoder follows the WHATWG event-stream rules (lines end in CRLF, LF or CR; `data`
lines accumulate; an empty line dispatches; a block without `data` lines dispatches
nothing but still updates the last event id and the retry delay; MCP's priming event is
an `id` with an empty `data`, dispatched with `data == ""`). The last event id moves only
when its block ends, so a stream cut inside an event resumes with that event, not after it;
a UTF-8 byte order mark opening the stream is dropped. It takes arbitrary byte chunks, so
one event may be larger than any buffer limit of the HTTP client.
"""

from __future__ import annotations

from dataclasses import dataclass

BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event; `data` lines are joined with newlines."""

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SseDecoder:
    """Turns byte chunks into events; keeps `last_event_id` and `retry` for reconnects."""

    def __init__(self, *, last_event_id: str | None = None) -> None:
        self.last_event_id = last_event_id  # of the last block completed: what a resume asks for
        self.retry: int | None = None
        self._id = last_event_id  # set by `id:` lines, committed to last_event_id when the block ends
        self._start: bytes | None = b""  # the stream's first bytes while a BOM may be among them
        self._partial: list[bytes] = []  # the unfinished line, in pieces: no quadratic copying
        self._skip_lf = False  # the last chunk ended in CR; an LF opening the next completes it
        self._data: list[str] = []
        self._event = ""
        self._block_retry: int | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Decode `chunk`; return the events it completes, in order."""
        if self._start is not None:
            chunk = self._without_bom(chunk)
        if not chunk:
            return []
        if self._skip_lf and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._skip_lf = chunk.endswith(b"\r")
        lines = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        if len(lines) == 1:
            self._partial.append(lines[0])
            return []
        lines[0] = b"".join([*self._partial, lines[0]])
        self._partial = [lines.pop()]
        events = []
        for line in lines:
            event = self._line(line.decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)
        return events

    def reconnected(self) -> None:
        """Drop a half-received event; keep `last_event_id` and `retry` for the new stream."""
        self._partial, self._skip_lf, self._start = [], False, b""
        self._data, self._event, self._block_retry = [], "", None
        self._id = self.last_event_id

    def _without_bom(self, chunk: bytes) -> bytes:
        """`chunk` without the BOM that may open the stream (held back while it may be one)."""
        assert self._start is not None
        head = self._start + chunk
        if len(head) < len(BOM) and BOM.startswith(head):
            self._start = head
            return b""
        self._start = None
        return head.removeprefix(BOM)

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # comment (keep-alive)
        name, _, value = line.partition(":")
        self._field(name, value.removeprefix(" "))
        return None

    def _field(self, name: str, value: str) -> None:
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isdigit():
            self.retry = self._block_retry = int(value)

    def _dispatch(self) -> SseEvent | None:
        data, event, retry = self._data, self._event, self._block_retry
        self._data, self._event, self._block_retry = [], "", None
        self.last_event_id = self._id
        if not data:
            return None
        return SseEvent("\n".join(data), event or "message", self.last_event_id, retry)


def encode_event(data: bytes, *, event_id: str | None = None, event: str | None = None) -> bytes:
    """Encode one event; `data` may hold newlines (each line becomes a `data:` field)."""
    head = b""
    if event_id is not None:
        head += b"id: " + event_id.encode() + b"\n"
    if event is not None:
        head += b"event: " + event.encode() + b"\n"
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    return head + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"


def encode_retry(milliseconds: int, *, event_id: str | None = None) -> bytes:
    """A block with only `retry` (and optionally `id`): MCP's priming / polling hint."""
    head = b"" if event_id is None else b"id: " + event_id.encode() + b"\n"
    return head + b"retry: " + str(milliseconds).encode() + b"\n\n"
