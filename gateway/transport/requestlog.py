"""The canonical one-line-per-request log and the request metrics, for both transports.

Over HTTP one middleware sees every request: it assigns the request id and the W3C trace
context, and when the reply is done writes the line and the metrics, so both agree on outcome
and duration (refusals before any JSON-RPC, such as 401 or 415, included). Over stdio the
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
from typing import Any

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.config import Config
from gateway.logs import MAX_LOGGED_CHARS, TRACEPARENT_HEADER, EventLog, RequestIds, clip, traceparent_for
from gateway.metrics import Metrics
from gateway.tenancy import Principal, RequestContext

REQUEST_ID = web.RequestKey[str]("request_id")
TRACEPARENT = web.RequestKey[str]("traceparent")  # W3C trace context sent to backends
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
        "trace_id": traceparent[3:35] if traceparent else None,
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
    app.middlewares.append(_request_log(config.server.path, metrics, totals, events or EventLog()))
    app.on_startup.append(_log_started(config, totals))  # runs after every cleanup_ctx startup: the state is built
    app.on_cleanup.append(_log_stopped(totals))  # runs after every cleanup_ctx teardown


def _request_log(mcp_path: str, metrics: Metrics, totals: _Totals,
                 events: EventLog) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    fresh_id = RequestIds()

    @web.middleware
    async def request_log(request: web.Request, handler: Handler) -> web.StreamResponse:
        request_id = request[REQUEST_ID] = request_id_of(request, fresh_id)
        request[TRACEPARENT] = traceparent_for(request.headers.get(TRACEPARENT_HEADER))
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
            outcome = outcome_of(ctx, status)
            if path == mcp_path:
                _count(request, ctx, principal, metrics, totals, rpc, outcome, status, seconds)
            _log_line(events, request, ctx, principal, outcome, status, seconds)

    return request_log


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
                             request_id=request[REQUEST_ID], traceparent=request[TRACEPARENT])


def _log_line(events: EventLog, request: web.Request, ctx: RequestContext | None, principal: Principal | None,
              outcome: str, status: int, seconds: float) -> None:
    line = request_line(request[REQUEST_ID], request[TRACEPARENT], principal, ctx, outcome, seconds)
    path = request.path  # never the query string: it may carry a token
    line["http_method"], line["path"], line["status"] = request.method, clip(path), status
    events.write(logging.DEBUG if path in QUIET_PATHS else logging.INFO, line)


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

