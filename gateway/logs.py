"""structlog setup, the canonical one-line-per-request log, request ids and trace context.

One middleware sees every HTTP request: it assigns the request id and the W3C trace context,
and when the reply is done writes the canonical log line and the request metrics, so both
agree on outcome and duration. Start and stop lines bracket the app's life.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import re
import secrets
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from gateway import keys
from gateway.config import LoggingConfig
from gateway.protocol import spec

if TYPE_CHECKING:
    from gateway.metrics import Metrics
    from gateway.tenancy import Principal, RequestContext

REQUEST_ID_HEADER = "X-Request-Id"
TRACEPARENT_HEADER = "traceparent"
_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16
NEW_TRACE_FLAGS = "01"
"""Flags of a trace the gateway starts: sampled, so parent-based samplers in backends record it."""
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
"""Probes and scrapes arrive every few seconds; their lines go out at debug level."""

HTTP_OUTCOMES = {401: "unauthorized", 403: "forbidden", 429: "rate_limited"}
"""Outcome of a request refused at the HTTP layer, by status (other 4xx: bad_request)."""

log = structlog.get_logger("gateway.request")
lifecycle_log = structlog.get_logger("gateway")


def configure_logging(config: LoggingConfig, *, stream: object = None) -> EventLog:
    """JSON lines on stdout (or console rendering when stderr is a terminal and format=auto).

    Returns the fast way out for ready event dicts (the request line), bound to this setup.

    JSON lines take one processor (`JsonLine`: level, timestamp, exception, render) and, on a
    binary stream, one write of the rendered bytes: every request writes a line, and structlog's
    generic chain and locked writer were half of that line's cost. No contextvars merging:
    nothing binds any.
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

    datetime's isoformat on every line was a quarter of the request line's cost.
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
    structlog's wrapper, proxy and event copy were most of the line's cost, every request).

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


def request_id_of(request: web.Request, fresh: Callable[[], str]) -> str:
    """The client's X-Request-Id when it is a sane token, else a fresh one."""
    given = request.headers.get(REQUEST_ID_HEADER)
    return given if given and _SAFE_REQUEST_ID.fullmatch(given) else fresh()


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


def outcome_of(ctx: object | None, status: int) -> str:
    """One word for how a request ended, shared by the log line and `mcpgw_requests_total`."""
    if status >= 500:
        return "error"
    if status >= 400:
        return HTTP_OUTCOMES.get(status, "bad_request")
    return getattr(ctx, "outcome", "ok")


@dataclass(slots=True)
class _Totals:
    """What the stop line reports: requests on the MCP endpoint, how many failed, uptime."""

    requests: int = 0
    errors: int = 0
    started: float = field(default_factory=time.monotonic)


def setup_request_log(app: web.Application, metrics: Metrics, events: EventLog | None = None) -> None:
    """The request-log middleware; its lines go out through `events` (configure_logging's)."""
    totals = _Totals()
    app.middlewares.append(_request_log(app[keys.CONFIG].server.path, metrics, totals, events or EventLog()))
    app.on_startup.append(_log_started(totals))  # runs after every cleanup_ctx startup: the state is built
    app.on_cleanup.append(_log_stopped(totals))  # runs after every cleanup_ctx teardown


def _request_log(mcp_path: str, metrics: Metrics, totals: _Totals,
                 events: EventLog) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    fresh_id = RequestIds()

    @web.middleware
    async def request_log(request: web.Request, handler: Handler) -> web.StreamResponse:
        request_id = request[keys.REQUEST_ID] = request_id_of(request, fresh_id)
        request[keys.TRACEPARENT] = traceparent_for(request.headers.get(TRACEPARENT_HEADER))
        # JSON-RPC traffic is POSTs; GET streams live for hours and DELETEs end sessions.
        path = request.path
        rpc = request.method == "POST" and path == mcp_path
        if rpc:
            metrics.inflight_add(1)
        started = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            if not response.prepared:  # a stream has it already (stream_headers)
                response.headers[REQUEST_ID_HEADER] = request_id
            return response
        except web.HTTPException as exc:
            status = exc.status
            exc.headers[REQUEST_ID_HEADER] = request_id
            raise
        finally:
            seconds = time.perf_counter() - started
            if rpc:
                metrics.inflight_add(-1)
            ctx, principal = request.get(keys.CONTEXT), request.get(keys.PRINCIPAL)
            outcome = outcome_of(ctx, status)
            if path == mcp_path:
                _count(request, ctx, principal, metrics, totals, rpc, outcome, status, seconds)
            _log_line(events, request, ctx, principal, outcome, status, seconds)

    return request_log


def stream_headers(request: web.Request, headers: dict[str, str]) -> dict[str, str]:
    """Headers of a reply the handler prepares itself (SSE): X-Request-Id must be in them already."""
    request_id = request.get(keys.REQUEST_ID)
    return {**headers, REQUEST_ID_HEADER: request_id} if request_id is not None else headers


def _count(request: web.Request, ctx: RequestContext | None, principal: Principal | None, metrics: Metrics,
           totals: _Totals, rpc: bool, outcome: str, status: int, seconds: float) -> None:
    """Totals for the stop line, and the request metrics of the MCP endpoint."""
    totals.requests += 1
    totals.errors += outcome != "ok"
    tenant = principal.tenant if principal else None
    if status == 429:
        metrics.rate_limit_hit(tenant)
    if rpc:
        metrics.request_done(method=ctx.method if ctx else None, tenant=tenant, outcome=outcome, seconds=seconds,
                             request_id=request[keys.REQUEST_ID], traceparent=request[keys.TRACEPARENT])
    if request.method == "DELETE" or (ctx is not None and ctx.method == spec.INITIALIZE):
        sessions = request.app.get(keys.SESSIONS)
        if sessions is not None:  # the count changes here; other changes show up at scrape time
            metrics.sessions_observed(sessions.count())


def _log_line(events: EventLog, request: web.Request, ctx: RequestContext | None, principal: Principal | None,
              outcome: str, status: int, seconds: float) -> None:
    path = request.path  # never the query string: it may carry a token
    events.write(logging.DEBUG if path in QUIET_PATHS else logging.INFO, {
        "event": "request",
        "request_id": request[keys.REQUEST_ID],
        "trace_id": request[keys.TRACEPARENT][3:35],
        "http_method": request.method,
        "path": path,
        "tenant": principal.tenant if principal else None,
        "subject": principal.subject if principal else None,
        "method": ctx.method if ctx else None,
        "tool": ctx.tool if ctx else None,
        "backend": ctx.backend if ctx else None,
        "status": status,
        "outcome": outcome,
        "duration_ms": round(seconds * 1000, 3),
    })


def _log_started(totals: _Totals) -> Callable[[web.Application], Awaitable[None]]:
    async def log_started(app: web.Application) -> None:
        totals.started = time.monotonic()
        config = app[keys.CONFIG]
        lifecycle_log.info("gateway_started", path=config.server.path, backends=len(config.backends),
                           tenants=len(config.tenants), metrics_port=config.metrics.port, pid=os.getpid())

    return log_started


def _log_stopped(totals: _Totals) -> Callable[[web.Application], Awaitable[None]]:
    async def log_stopped(app: web.Application) -> None:
        lifecycle_log.info("gateway_shutdown", requests=totals.requests, errors=totals.errors,
                           uptime_seconds=round(time.monotonic() - totals.started, 3), pid=os.getpid())

    return log_stopped
