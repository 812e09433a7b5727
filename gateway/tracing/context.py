"""W3C Trace Context as the gateway reads and passes it, with tracing on or off (no OpenTelemetry here).

A request may carry two contexts: the HTTP `traceparent`/`tracestate` headers (the transport's)
and `params._meta.traceparent`/`tracestate` (the MCP message's, SEP-414). The MCP conventions make
the `_meta` one the parent of the request's work and the transport's only a link, so `chosen`
prefers it. With tracing off the gateway is no hop of the trace: backends get the chosen context as
it came, in the header and in `_meta` alike, so their spans hang under the client's span; a request
that brought none gets a new trace, so the gateway's log line and the backend's share a trace id.
With tracing on, a request the sampler drops is `Unsampled`: a context of its own and no span.
"""

from __future__ import annotations

import random
import re
from contextvars import ContextVar
from typing import Any, NamedTuple

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16
_SPAN_BITS = (1 << 64) - 1
_KNOWN_FLAGS = frozenset({"00", "01", "02", "03"})
MAX_TRACESTATE_CHARS = 512
"""W3C: 32 members of at most 256 characters may be cut; a longer header is dropped here, never passed on."""
NEW_TRACE_FLAGS = "01"
"""Flags of a trace the gateway starts: sampled, so parent-based samplers in backends record it."""


CURRENT: ContextVar[Any] = ContextVar("mcpgw_span", default=None)
"""The innermost gateway span of the running task (a `spans.Traced`), None when tracing is off or outside any.

Work below the request context (authentication's JWKS fetch, an upstream's retry, a catalogue page)
reads it to find its parent; only the tracing side (spans.py) sets it."""


class TraceContext(NamedTuple):
    """One carrier's context: a normalised `traceparent` and its `tracestate` (None when absent)."""

    traceparent: str
    tracestate: str | None = None
    given: bool = True  # False: a trace the gateway started (`fresh`), no parent to link to


def chosen(meta: Any, fallback: TraceContext) -> TraceContext:
    """The context a request's backends continue: its `_meta`'s when valid (SEP-414), else `fallback`."""
    return of_meta(meta) or fallback if meta is not None else fallback


def parsed(value: Any) -> str | None:
    """`value` as a version-00 traceparent when it is a valid one (W3C §3.2), else None.

    A later version is read as 00 with the four fields it shares with 00; unknown flag bits are dropped."""
    if type(value) is not str:
        return None
    match = _TRACEPARENT.fullmatch(value.strip())
    if match is None:
        return None
    version, trace_id, span_id, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest) or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    if version == "00" and flags in _KNOWN_FLAGS:
        return value if len(value) == 55 else f"00-{trace_id}-{span_id}-{flags}"
    return f"00-{trace_id}-{span_id}-{int(flags, 16) & 0x03:02x}"  # version 00 defines two flag bits


def tracestate_of(value: Any) -> str | None:
    """A tracestate worth passing on: a string of printable ASCII, not too long."""
    if type(value) is not str or not value or len(value) > MAX_TRACESTATE_CHARS or not value.isprintable():
        return None
    return value if value.isascii() else None


def of_meta(meta: Any) -> TraceContext | None:
    """The context in a request's `params._meta`, when it has a valid one."""
    if type(meta) is not dict or TRACEPARENT not in meta:
        return None
    traceparent = parsed(meta[TRACEPARENT])
    return TraceContext(traceparent, tracestate_of(meta.get(TRACESTATE))) if traceparent else None


def of_headers(traceparent: str | None, tracestate: str | None) -> TraceContext | None:
    """The context in a request's HTTP headers, when it has a valid one."""
    value = parsed(traceparent) if traceparent else None
    return TraceContext(value, tracestate_of(tracestate)) if value else None


def fresh() -> TraceContext:
    """A new trace for a request that brought none (its own log line and backends share its id).

    Every such request pays for this, tracing on or off: its trace id and span id come from one draw, in hex
    by `bytes.hex` (a `:032x` format spec costs more than the draw)."""
    bits = random.getrandbits(192)
    while not (bits >> 64 and bits & _SPAN_BITS):  # an all-zero trace or span id is invalid (W3C §3.2.2)
        bits = random.getrandbits(192)
    ids = bits.to_bytes(24, "big").hex()
    traceparent = f"00-{ids[:32]}-{ids[32:]}-{NEW_TRACE_FLAGS}"
    return tuple.__new__(TraceContext, (traceparent, None, False))  # NamedTuple's own __new__ is a Python call


def trace_id(traceparent: str | None) -> str | None:
    """The trace id of a normalised traceparent (for log lines, exemplars and audit records)."""
    return traceparent[3:35] if traceparent else None


def with_context(meta: Any, traceparent: str, tracestate: str | None) -> dict[str, Any]:
    """A copy of `meta` (a request's `_meta`, or None) carrying this context, the carrier's old one replaced."""
    if type(meta) is not dict or not meta:
        return {TRACEPARENT: traceparent, TRACESTATE: tracestate} if tracestate else {TRACEPARENT: traceparent}
    out = {key: value for key, value in meta.items() if key != TRACESTATE}
    out[TRACEPARENT] = traceparent
    if tracestate:
        out[TRACESTATE] = tracestate
    return out


def _random_id(bits: int) -> int:
    """A nonzero random id. Trace ids need uniqueness, not secrecy: no getrandom() syscall per request
    (`random` reseeds itself in forked workers)."""
    return random.getrandbits(bits) or 1


class Unsampled:
    """A request the sampler dropped: no span, only a context of its own (a new span id, not sampled) that
    its backends hear, so that they drop it too, and that its log line names."""

    __slots__ = ("traceparent", "tracestate")

    recording = False

    def __init__(self, trace_id: int, tracestate: str | None) -> None:
        self.traceparent = f"00-{trace_id:032x}-{_random_id(64):016x}-00"
        self.tracestate = tracestate

    def call(self, backend: Any, method: str, params: dict[str, Any] | None,
             headers: dict[str, str] | None = None, *, upstream: Any = None) -> NoCall:
        """No CLIENT span: the backend hears this request's own (unsampled) context."""
        if params is not None:
            params["_meta"] = with_context(params.get("_meta"), self.traceparent, self.tracestate)
        if headers is not None:
            headers[TRACEPARENT] = self.traceparent
            if self.tracestate:
                headers[TRACESTATE] = self.tracestate
        return NO_CALL

    def activate(self) -> None:
        pass

    def failed(self, code: int, message: str) -> None:
        pass

    def finish(self, ctx: Any, http_status: int | None = None) -> None:
        pass


class NoCall:
    """The CLIENT span an unsampled request does not have."""

    __slots__ = ()

    server = None

    def activate(self) -> None:
        pass

    def settle(self, reply: Any, error: BaseException | None) -> None:
        pass


NO_CALL = NoCall()
