"""structlog setup, the fast event-line writer, request ids and W3C trace context.

The canonical per-request line itself is written by `transport.requestlog`, for both transports.
"""

from __future__ import annotations

import itertools
import logging
import random
import re
import secrets
import sys
import time
from typing import Any

import orjson
import structlog

from gateway.config import LoggingConfig

TRACEPARENT_HEADER = "traceparent"
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16
NEW_TRACE_FLAGS = "01"
"""Flags of a trace the gateway starts: sampled, so parent-based samplers in backends record it."""


log = structlog.get_logger("gateway.request")

MAX_LOGGED_CHARS = 200
"""A logged value a client chose (method name, path, claims) is cut to this many characters."""


def clip(value: str) -> str:
    """`value`, cut to MAX_LOGGED_CHARS: a client must not write megabytes of log per request."""
    return value if len(value) <= MAX_LOGGED_CHARS else value[:MAX_LOGGED_CHARS] + "..."


def configure_logging(config: LoggingConfig, *, stream: object = None) -> EventLog:
    """JSON lines on stdout (or console rendering when stderr is a terminal and format=auto).

    Returns the fast way out for ready event dicts (the request line), bound to this setup.

    JSON lines take one processor (`JsonLine`: level, timestamp, exception, render) and, on a
    binary stream, one write of the rendered bytes: every request writes a line, and structlog's
    generic chain and locked writer were a large share of that line's cost (bench/FIGURES.md).
    No contextvars merging: nothing binds any.
    """
    out: Any = stream or sys.stdout
    console = config.format == "console" or (config.format == "auto" and sys.stderr.isatty())
    binary = None if console else getattr(out, "buffer", None)
    factory: Any
    if console:
        processors: list[Any] = [structlog.processors.add_log_level, UtcTimestamp(),
                                 structlog.processors.format_exc_info, structlog.dev.ConsoleRenderer()]
        factory = structlog.WriteLoggerFactory(out)
    elif binary is not None:
        processors, factory = [JsonLine(as_bytes=True)], _LineWriterFactory(binary)
    else:  # a text stream (StringIO in tests): str lines through structlog's writer
        processors, factory = [JsonLine(as_bytes=False)], structlog.WriteLoggerFactory(out)
    level = getattr(logging, config.level.upper())
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=factory,
        cache_logger_on_first_use=True,
    )
    _capture_stdlib_logging(level)
    return EventLog(processors, factory(), level)


class _OneLineHandler(logging.Handler):
    """Stdlib records (aiohttp, asyncio) as one structlog line each, never a multi-line traceback.

    aiohttp logs every malformed request with its traceback; a hostile client must not be able
    to flood the log with those, so only the exception's type is kept.
    """

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "aiohttp.access":
            return  # our canonical line replaces it, and its request line may carry ?token=
        fields: dict[str, Any] = {"logger": record.name}
        if record.exc_info and record.exc_info[0] is not None:
            fields["error"] = record.exc_info[0].__name__
        level = "info" if record.name == "aiohttp.server" else record.levelname.lower()
        structlog.get_logger(record.name).log(getattr(logging, level.upper(), logging.INFO),
                                              record.getMessage(), **fields)


def _capture_stdlib_logging(level: int) -> None:
    root = logging.getLogger()
    root.handlers = [h for h in root.handlers if not isinstance(h, _OneLineHandler)]
    root.addHandler(_OneLineHandler())
    root.setLevel(max(level, logging.INFO))


class UtcTimestamp:
    """structlog's `TimeStamper(fmt="iso", utc=True)`, with the date and time formatted once a second.

    datetime's isoformat on every line was a visible share of the request line's cost (bench/FIGURES.md).
    """

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def __call__(self, _logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second, self._prefix = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        event["timestamp"] = f"{self._prefix}.{int((now - second) * 1_000_000):06d}Z"
        return event


class JsonLine:
    """The whole JSON-line chain in one processor: level, UTC timestamp, exception text, orjson.

    Bytes with their newline for `_LineWriter`, or a str for structlog's text writer.
    """

    def __init__(self, *, as_bytes: bool) -> None:
        self._stamp = UtcTimestamp()
        self._as_bytes = as_bytes

    def __call__(self, logger: Any, name: str, event: dict[str, Any]) -> bytes | str:
        event = structlog.processors.add_log_level(logger, name, event)
        self._stamp(logger, name, event)
        if "exc_info" in event:
            event = structlog.processors.format_exc_info(logger, name, event)
        if self._as_bytes:
            return orjson.dumps(event, default=str, option=orjson.OPT_APPEND_NEWLINE)
        return orjson.dumps(event, default=str).decode()


class _LineWriter:
    """Writes each rendered line (bytes, newline included) with one write and a flush.

    No lock: a buffered binary stream's write is atomic, and one write per line keeps the
    lines of `--workers` from interleaving on a shared stdout.
    """

    def __init__(self, stream: Any) -> None:
        self._write = stream.write
        self._flush = stream.flush

    def msg(self, line: bytes) -> None:
        self._write(line)
        self._flush()

    debug = info = warning = warn = error = exception = critical = fatal = log = msg


class _LineWriterFactory:
    def __init__(self, stream: Any) -> None:
        self._writer = _LineWriter(stream)

    def __call__(self, *_: Any) -> _LineWriter:
        return self._writer


class EventLog:
    """The request line's way out: a ready event dict through structlog's configured processors
    and logger, without the bound logger's keyword plumbing (a dozen keyword fields through
    structlog's wrapper, proxy and event copy were much of the line's cost, every request).

    `configure_logging` returns one bound to what it configured; its processors list is
    structlog's own object, so `structlog.testing.capture_logs` sees these lines too. An
    `EventLog()` made without them (apps built without configuring logging, as in tests)
    sends lines through structlog's bound logger as usual.
    """

    def __init__(self, processors: list[Any] | None = None, logger: Any = None, level: int = logging.INFO) -> None:
        self._processors, self._logger, self._level = processors, logger, level

    def write(self, level: int, event: dict[str, Any]) -> None:
        """Log a ready event dict (its `event` key is the message) at a stdlib level."""
        name = _NAMES[level]
        if self._processors is None:
            getattr(log, name)(event.pop("event"), **event)
            return
        if level < self._level:
            return
        rendered: Any = event
        try:
            for processor in self._processors:
                rendered = processor(self._logger, name, rendered)
        except structlog.DropEvent:
            return
        getattr(self._logger, name)(rendered)


_NAMES = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warning", logging.ERROR: "error"}


class RequestIds:
    """Fresh request ids: a random per-process prefix and a counter (unique, and cheaper than uuid4)."""

    def __init__(self) -> None:
        self._prefix = secrets.token_hex(8)
        self._counter = itertools.count(1)

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._counter):016x}"


def traceparent_for(given: str | None) -> str:
    """The traceparent backends get: the client's trace with a new span id of ours, or a new trace.

    The gateway is a hop in the client's trace, so it keeps the trace id and flags and puts
    its own span id in; an absent or malformed header (W3C Trace Context §3.2) starts a trace.
    """
    parsed = _TRACEPARENT.fullmatch(given.strip()) if given else None
    if parsed and _usable(parsed):
        trace_id, flags = parsed[2], f"{int(parsed[4], 16) & 0x03:02x}"  # version 00 defines 2 flag bits
    else:
        trace_id, flags = f"{_random_id(128):032x}", NEW_TRACE_FLAGS
    return f"00-{trace_id}-{_random_id(64):016x}-{flags}"


def _random_id(bits: int) -> int:
    """A nonzero random id. Trace ids need uniqueness, not secrecy: no getrandom() syscall per request
    (`random` reseeds itself in forked workers)."""
    return random.getrandbits(bits) or 1


def _usable(parsed: re.Match[str]) -> bool:
    version, trace_id, span_id, _, rest = parsed.groups()
    if version == "ff" or (version == "00" and rest):  # ff is invalid; 00 has exactly four fields
        return False
    return trace_id != _ZERO_TRACE and span_id != _ZERO_SPAN
