"""The one place where an escaped error becomes an HTTP reply (never with a traceback)."""

from __future__ import annotations

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from gateway.logs import clip
from gateway.protocol import jsonrpc
from gateway.protocol.errors import GatewayError, HttpError, InternalError

log = structlog.get_logger("gateway.http")


def error_reply(error: GatewayError) -> web.Response:
    headers = error.headers if isinstance(error, HttpError) else None
    reply = web.Response(status=error.http_status, headers=headers,
                         body=jsonrpc.dumps(jsonrpc.error_response(None, error)),
                         content_type="application/json")
    if isinstance(error, HttpError) and error.closes_connection:
        reply.force_close()
    return reply


def error_replies() -> Middleware:
    """The middleware that turns an escaped error into its reply."""

    @web.middleware
    async def reply_to_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except GatewayError as exc:
            return error_reply(exc)
        except (web.HTTPException, ConnectionError):
            raise  # aiohttp's own replies; a client that hung up (the request log says so)
        except Exception:
            log.exception("request_failed", path=clip(request.path))
            return error_reply(_internal())

    return reply_to_errors


def _internal() -> InternalError:
    error = InternalError("Internal error")
    error.http_status = 500
    return error
