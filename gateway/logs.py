"""structlog setup and the canonical one-line-per-request log."""

from __future__ import annotations

import logging
import re
import sys
import time
import uuid

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from gateway import keys
from gateway.config import LoggingConfig

REQUEST_ID_HEADER = "X-Request-Id"
_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

log = structlog.get_logger("gateway.request")


def configure_logging(config: LoggingConfig, *, stream: object = None) -> None:
    """JSON lines on stdout (or console rendering when stderr is a terminal and format=auto)."""
    out = stream or sys.stdout
    console = config.format == "console" or (config.format == "auto" and sys.stderr.isatty())
    renderer = structlog.dev.ConsoleRenderer() if console else structlog.processors.JSONRenderer()
    level = getattr(logging, config.level.upper())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=True,
    )


def request_id_of(request: web.Request) -> str:
    """The client's X-Request-Id when it is a sane token, else a fresh one."""
    given = request.headers.get(REQUEST_ID_HEADER, "")
    return given if _SAFE_REQUEST_ID.fullmatch(given) else uuid.uuid4().hex


def setup_request_log(app: web.Application) -> None:
    @web.middleware
    async def request_log(request: web.Request, handler: Handler) -> web.StreamResponse:
        request_id = request[keys.REQUEST_ID] = request_id_of(request)
        started = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            response.headers[REQUEST_ID_HEADER] = request_id
            return response
        except web.HTTPException as exc:
            status = exc.status
            exc.headers[REQUEST_ID_HEADER] = request_id
            raise
        finally:
            _log_line(request, request_id, status, time.perf_counter() - started)

    app.middlewares.append(request_log)


def _log_line(request: web.Request, request_id: str, status: int, seconds: float) -> None:
    ctx = request.get(keys.CONTEXT)
    principal = request.get(keys.PRINCIPAL)
    log.info(
        "request",
        request_id=request_id,
        http_method=request.method,
        path=request.path,  # never the query string: it may carry a token
        tenant=principal.tenant if principal else None,
        subject=principal.subject if principal else None,
        method=ctx.method if ctx else None,
        tool=ctx.tool if ctx else None,
        backend=ctx.backend if ctx else None,
        status=status,
        outcome=(ctx.outcome if ctx else ("ok" if status < 400 else "refused")),
        duration_ms=round(seconds * 1000, 3),
    )
