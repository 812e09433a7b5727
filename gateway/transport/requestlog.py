"""The canonical one-line-per-request log and the request metrics, for both transports.

Over HTTP one middleware sees every request: it assigns the request id and reads the W3C trace
context of its headers, and when the reply is done writes the line and the metrics (and ends
the request's span, tracing on), so all agree on outcome and duration (refusals before any
JSON-RPC, such as 401 or 415, included). Over stdio the
adapter writes the same line, built by the same `request_line`, for every message it answers.
Start and stop lines bracket the HTTP app's life.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.config import Config
from gateway.logs import MAX_LOGGED_CHARS, EventLog, RequestIds, clip
from gateway.metrics import Metrics
from gateway.tenancy import Principal, RequestContext
from gateway.tracing.context import TRACEPARENT as TRACEPARENT_HEADER
from gateway.tracing.context import TRACESTATE as TRACESTATE_HEADER
from gateway.tracing.context import TraceContext, fresh, of_headers, trace_id
from gateway.tracing.conventions import Peer

if TYPE_CHECKING:
    from gateway.tracing.spans import RequestSpan

REQUEST_ID = web.RequestKey[str]("request_id")
TRACE = web.RequestKey[TraceContext]("trace")  # the headers' trace context, or a new one (`given` False)
SPAN: web.RequestKey[RequestSpan] = web.RequestKey("span")  # the SERVER span of its one MCP message (tracing on)
PRINCIPAL = web.RequestKey[Principal]("principal")
CONTEXT = web.RequestKey[RequestContext]("context")

REQUEST_ID_HEADER = "X-Request-Id"
_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
"""Probes and scrapes arrive every few seconds; their lines go out at debug level."""

CLIENT_CLOSED = 499
"""The status logged for a request whose client hung up before its reply (nginx's convention)."""

HTTP_OUTCOMES = {401: "unauthorized", 403: "forbidden", 408: "client_timeout", 429: "rate_limited",
                 CLIENT_CLOSED: "cancelled"}
"""Outcome of a request refused at the HTTP layer, by status (other 4xx: bad_request)."""

lifecycle_log = structlog.get_logger("gateway")


def request_line(request_id: str, traceparent: str | None, principal: Principal | None,
                 ctx: RequestContext | None, outcome: str, seconds: float) -> dict[str, Any]:
    """The canonical line's fields; each transport adds its own (HTTP: method, path, status).

    The dispatcher's extras follow (e.g. `client_requests`: what the backend asked the client)."""
    method = ctx.method if ctx else None
    line = {
        "event": "request",
        "request_id": request_id,
        "trace_id": trace_id(traceparent),
        "tenant": principal.tenant if principal else None,  # claims are bounded by the authenticator
        "subject": principal.subject if principal else None,
        "method": clip(method) if method and len(method) > MAX_LOGGED_CHARS else method,
        "tool": ctx.tool if ctx else None,
        "backend": ctx.backend if ctx else None,
        "outcome": outcome,
        "duration_ms": round(seconds * 1000, 3),
    }
    if ctx is not None and ctx.extra:
        line.update(ctx.extra)
    return line


def request_id_of(request: web.Request, fresh: Callable[[], str]) -> str:
    """The client's X-Request-Id when it is a sane token, else a fresh one."""
    given = request.headers.get(REQUEST_ID_HEADER)
    return given if given and _SAFE_REQUEST_ID.fullmatch(given) else fresh()


def outcome_of(ctx: RequestContext | None, status: int) -> str:
    """One word for how a request ended, shared by the log line and `mcpgw_requests_total`."""
    if status >= 500:
        return "error"
    if status >= 400:
        return HTTP_OUTCOMES.get(status, "bad_request")
    return ctx.outcome if ctx is not None else "ok"


def trace_of(headers: Any) -> TraceContext:
    """The trace context of a request's headers, or a new trace when they carry none that is valid."""
    given = headers.get(TRACEPARENT_HEADER)
    return (given is not None and of_headers(given, headers.get(TRACESTATE_HEADER))) or fresh()


def given_trace(request: web.Request) -> TraceContext | None:
    """The headers' trace context, when the client sent one (a new trace is no parent)."""
    trace = request[TRACE]
    return trace if trace.given else None


def peer_of(request: web.Request) -> Peer:
    """Where an HTTP request came from, for its SERVER span."""
    peer = request.transport.get_extra_info("peername") if request.transport is not None else None
    address, port = (peer[0], peer[1]) if isinstance(peer, tuple) and len(peer) >= 2 else (None, None)
    return Peer("tcp", address, port, f"{request.version.major}.{request.version.minor}")


def stream_headers(request: web.Request, headers: dict[str, str]) -> dict[str, str]:
    """Headers of a reply the handler prepares itself (SSE): X-Request-Id must be in them already."""
    request_id = request.get(REQUEST_ID)
    return {**headers, REQUEST_ID_HEADER: request_id} if request_id is not None else headers


# ---------------------------------------------------------------- the HTTP middleware


@dataclass(slots=True)
class _Totals:
    """What the stop line reports: requests on the MCP endpoint, how many failed, uptime."""

    requests: int = 0
    errors: int = 0
    started: float = field(default_factory=time.monotonic)


def setup_request_log(app: web.Application, config: Config, metrics: Metrics,
                      events: EventLog | None = None) -> None:
    """The request-log middleware; its lines go out through `events` (configure_logging's)."""
    totals = _Totals()
    app.middlewares.append(_request_log(config.server.path, metrics, totals, events or EventLog(),
                                        traced=config.tracing.enabled))
    app.on_startup.append(_log_started(config, totals))  # runs after every cleanup_ctx startup: the state is built
    app.on_cleanup.append(_log_stopped(totals))  # runs after every cleanup_ctx teardown


def _request_log(mcp_path: str, metrics: Metrics, totals: _Totals, events: EventLog, *,
                 traced: bool) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    fresh_id = RequestIds()

    @web.middleware
    async def request_log(request: web.Request, handler: Handler) -> web.StreamResponse:
        request_id = request[REQUEST_ID] = request_id_of(request, fresh_id)
        request[TRACE] = trace_of(request.headers)
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
        except (asyncio.CancelledError, ConnectionError) as exc:
            status = CLIENT_CLOSED  # the client hung up: not the gateway's failure
            if isinstance(exc, asyncio.CancelledError):
                raise
            return web.Response(status=CLIENT_CLOSED)  # never sent: aiohttp finds the connection gone
        finally:
            seconds = time.perf_counter() - started
            if rpc:
                metrics.inflight_add(-1)
            # popped by its last reader: the context holds the channel that holds the request, a cycle
            # that would keep them all (and the parsed body) alive until the next garbage collection
            ctx, principal = request.pop(CONTEXT, None), request.get(PRINCIPAL)
            if traced and (span := request.pop(SPAN, None)) is not None:
                span.finish(ctx, status)
            outcome, traceparent = outcome_of(ctx, status), _traceparent(request, ctx)
            if path == mcp_path:
                _count(request, ctx, principal, metrics, totals, rpc, outcome, status, seconds, traceparent)
            _log_line(events, request, ctx, principal, outcome, status, seconds, traceparent)

    return request_log


def _count(request: web.Request, ctx: RequestContext | None, principal: Principal | None, metrics: Metrics,
           totals: _Totals, rpc: bool, outcome: str, status: int, seconds: float, traceparent: str) -> None:
    """Totals for the stop line, and the request metrics of the MCP endpoint."""
    totals.requests += 1
    totals.errors += outcome != "ok"
    tenant = principal.tenant if principal else None
    if status == 429:
        metrics.rate_limit_hit(tenant)
    if rpc:
        metrics.request_done(method=ctx.method if ctx else None, tenant=tenant, outcome=outcome, seconds=seconds,
                             request_id=request[REQUEST_ID], traceparent=traceparent)


def _log_line(events: EventLog, request: web.Request, ctx: RequestContext | None, principal: Principal | None,
              outcome: str, status: int, seconds: float, traceparent: str) -> None:
    line = request_line(request[REQUEST_ID], traceparent, principal, ctx, outcome, seconds)
    path = request.path  # never the query string: it may carry a token
    route = request.match_info.route.resource  # a dynamic route's template: its parts may be secrets (link ids)
    logged = route.canonical if route is not None and not isinstance(route, web.PlainResource) else path
    line["http_method"], line["path"], line["status"] = request.method, clip(logged), status
    events.write(logging.DEBUG if path in QUIET_PATHS else logging.INFO, line)


def _traceparent(request: web.Request, ctx: RequestContext | None) -> str:
    """The trace a request's line and exemplar name: its context's (the one its backends continue, or its
    span's), else, refused before it had one, its headers' (or its span's, as `McpEndpoint` sets it)."""
    return ctx.traceparent or request[TRACE].traceparent if ctx is not None else request[TRACE].traceparent


def _log_started(config: Config, totals: _Totals) -> Callable[[web.Application], Awaitable[None]]:
    async def log_started(app: web.Application) -> None:
        totals.started = time.monotonic()
        lifecycle_log.info("gateway_started", path=config.server.path, backends=len(config.backends),
                           tenants=len(config.tenants), metrics_port=config.metrics.port, pid=os.getpid())

    return log_started


def _log_stopped(totals: _Totals) -> Callable[[web.Application], Awaitable[None]]:
    async def log_stopped(app: web.Application) -> None:
        lifecycle_log.info("gateway_shutdown", requests=totals.requests, errors=totals.errors,
                           uptime_seconds=round(time.monotonic() - totals.started, 3), pid=os.getpid())

    return log_stopped

