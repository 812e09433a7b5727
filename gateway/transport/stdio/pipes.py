"""stdin and stdout for `mcp-gateway stdio`: blocking, thread-read pipes that never touch the fds' modes."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Protocol

READ_CHUNK = 65536


class FdWriter:
    """Blocking, unbuffered writes to the protocol fd.

    Unbuffered, so a reply is on the wire at once and nothing is left to flush (or to fail
    with EPIPE) at exit; blocking, so the fd's mode is never changed (with a terminal, it
    is shared with stderr). A client that stops reading stalls us, as with any stdio server.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]


class LineSplitter:
    """Splits a byte stream into lines; a line longer than `limit` is dropped and reported."""

    OVERSIZE = object()

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._skipping = False  # inside a line that is already over the limit

    def feed(self, chunk: bytes) -> list[Any]:
        """Complete lines (bytes) and OVERSIZE markers found so far."""
        self._buffer += chunk
        found: list[Any] = []
        while (newline := self._buffer.find(b"\n")) >= 0:
            line = bytes(self._buffer[:newline])
            del self._buffer[: newline + 1]
            if self._skipping:
                self._skipping = False
            elif len(line) > self.limit:
                found.append(self.OVERSIZE)
            else:
                found.append(line)
        if len(self._buffer) > self.limit and not self._skipping:
            self._buffer.clear()
            self._skipping = True
            found.append(self.OVERSIZE)
        elif self._skipping:
            self._buffer.clear()
        return found

    def rest(self) -> bytes:
        """A last line without its newline, at EOF."""
        return b"" if self._skipping else bytes(self._buffer)


class LineSink(Protocol):
    """Where the reader thread hands what it reads (called on the loop's thread)."""

    def feed(self, line: bytes) -> None:
        """A complete line."""

    def oversize(self, limit: int) -> None:
        """A line over the limit was dropped."""

    def eof(self) -> None:
        """The input ended."""


def start_reader(fd: int, sink: LineSink, loop: asyncio.AbstractEventLoop, limit: int) -> threading.Thread:
    """Read `fd` in a daemon thread, handing lines to `sink` (a LineSink) on its loop.

    A thread with plain blocking `os.read`: it never switches the fd to non-blocking mode
    (a terminal shares it with stderr), holds no Python I/O lock that could hang the
    interpreter's exit, and dies with the process when the session is over.
    """
    thread = threading.Thread(target=_read_lines, args=(fd, sink, loop, limit), name="stdio-reader",
                              daemon=True)
    thread.start()
    return thread


def _read_lines(fd: int, sink: LineSink, loop: asyncio.AbstractEventLoop, limit: int) -> None:
    splitter = LineSplitter(limit)
    try:
        while chunk := _read(fd):
            for item in splitter.feed(chunk):
                if item is LineSplitter.OVERSIZE:
                    loop.call_soon_threadsafe(sink.oversize, limit)
                else:
                    loop.call_soon_threadsafe(sink.feed, item)
        if last := splitter.rest():
            loop.call_soon_threadsafe(sink.feed, last)
        loop.call_soon_threadsafe(sink.eof)
    except RuntimeError:  # the loop is closed: the client's session ended for another reason
        return


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, READ_CHUNK)
    except OSError:  # a closed or broken stdin counts as EOF
        return b""
