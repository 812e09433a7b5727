"""The one place where an escaped error becomes an HTTP reply (never with a traceback)."""

from __future__ import annotations

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.errors import GatewayError, HttpError, InternalError
from gateway.protocol import jsonrpc

log = structlog.get_logger("gateway.http")


def error_reply(error: GatewayError) -> web.Response:
    headers = error.headers if isinstance(error, HttpError) else None
    return web.Response(status=error.http_status, headers=headers,
                        body=jsonrpc.dumps(jsonrpc.error_response(None, error)),
                        content_type="application/json")


def setup_error_replies(app: web.Application) -> None:
    @web.middleware
    async def error_replies(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except GatewayError as exc:
            return error_reply(exc)
        except web.HTTPException:
            raise
        except Exception:
            log.exception("request_failed", path=request.path)
            return error_reply(_internal())

    app.middlewares.append(error_replies)


def _internal() -> InternalError:
    error = InternalError("Internal error")
    error.http_status = 500
    return error
