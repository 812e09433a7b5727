"""The MCP methods, free of any transport: `handle(message, ctx) -> reply`.

HTTP and stdio both call `Dispatcher.handle`; it never sees a socket or a header.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson
import structlog

from gateway.catalogue.refresher import CatalogueService
from gateway.config import Config
from gateway.errors import BackendError, FailureReason, GatewayError, InternalError, InvalidParams, MethodNotFound
from gateway.logs import clip
from gateway.protocol import jsonrpc, spec
from gateway.protocol.jsonrpc import JsonObject, Message
from gateway.tenancy import RequestContext, upstream_headers
from gateway.upstream.base import UpstreamError
from gateway.upstream.pool import UpstreamPool

if TYPE_CHECKING:
    from gateway.metrics import Metrics

log = structlog.get_logger("gateway.dispatch")

SERVER_INFO = {"name": "mcp-gateway", "title": "MCP Gateway", "version": "0.1.0"}

Handler = Callable[[Message, RequestContext], Awaitable[Any]]


class Dispatcher:
    def __init__(self, *, config: Config, catalogue: CatalogueService, pool: UpstreamPool,
                 list_changed: bool = False, metrics: Metrics | None = None) -> None:
        self.config = config
        self.metrics = metrics
        self.catalogue = catalogue
        self.pool = pool
        self.list_changed = list_changed
        self._backends = {backend.name: backend for backend in config.backends}  # looked up on every call
        self._methods: dict[str, Handler] = {
            spec.INITIALIZE: self._initialize,
            spec.PING: self._ping,
            spec.TOOLS_LIST: self._tools_list,
            spec.TOOLS_CALL: self._tools_call,
        }

    async def handle(self, message: Message, ctx: RequestContext) -> JsonObject | None:
        """The reply to a request, or None for a notification or a response."""
        if not message.is_request:
            return None
        assert message.id is not None and message.method is not None
        started = time.perf_counter()
        try:
            handler = self._methods.get(message.method)
            if handler is None:
                raise MethodNotFound(f"Method not found: {message.method[:200]}")
            return jsonrpc.result_response(message.id, await handler(message, ctx))
        except _PassThrough as passed:
            return {"jsonrpc": "2.0", "id": message.id, "error": passed.error}
        except GatewayError as exc:
            ctx.outcome = _outcome(exc)
            return jsonrpc.error_response(message.id, exc)
        except Exception:
            log.exception("dispatch_failed", method=clip(message.method), request_id=ctx.request_id)
            ctx.outcome = "error"
            return jsonrpc.error_response(message.id, InternalError("Internal error"))
        finally:
            if self.metrics is not None:
                self.metrics.dispatched(message.method, ctx, time.perf_counter() - started)

    # ---------------------------------------------------------------- methods

    async def _initialize(self, message: Message, ctx: RequestContext) -> JsonObject:
        requested = (message.params or {}).get("protocolVersion")
        return {
            "protocolVersion": spec.negotiate_version(requested),
            "capabilities": {"tools": {"listChanged": self.list_changed}},
            "serverInfo": SERVER_INFO,
            "instructions": "Tools from several MCP servers; each name is prefixed by its server.",
        }

    async def _ping(self, message: Message, ctx: RequestContext) -> JsonObject:
        return {}

    async def _tools_list(self, message: Message, ctx: RequestContext) -> orjson.Fragment:
        cursor = (message.params or {}).get("cursor")
        return self.catalogue.view(ctx.tenant).page(cursor)

    async def _tools_call(self, message: Message, ctx: RequestContext) -> Any:
        params = message.params or {}
        view = self.catalogue.view(ctx.tenant)
        entry = view.lookup(params.get("name"))
        ctx.tool, ctx.backend = entry.exposed, entry.backend
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidParams("Invalid params: arguments must be an object")
        if self.config.catalogue.validate_arguments:
            problem = view.validate_arguments(entry, arguments)
            if problem:
                ctx.outcome = "invalid_arguments"
                return {"content": [{"type": "text", "text": problem}], "isError": True}
        forward: JsonObject = {"name": entry.original, "arguments": arguments}
        if isinstance(params.get("_meta"), dict):
            forward["_meta"] = params["_meta"]
        reply = await self._forward(entry.backend, forward, ctx)
        if "error" in reply:
            ctx.outcome = "backend_error"
            raise _PassThrough(_encoded(entry.backend, reply["error"], ctx))
        result = reply.get("result")
        if not isinstance(result, dict):  # a CallToolResult is an object; anything else is garbage
            raise _bad_reply(entry.backend, ctx, "tools/call result is not an object")
        if result.get("isError"):
            ctx.outcome = "tool_error"
        return _encoded(entry.backend, result, ctx)

    async def _forward(self, backend_name: str, params: JsonObject, ctx: RequestContext) -> JsonObject:
        backend = self._backends[backend_name]
        upstream = self.pool.get(backend_name)
        started = time.perf_counter()
        try:
            return await upstream.request(
                spec.TOOLS_CALL, params, timeout=backend.timeout_seconds,
                session_key=ctx.principal.tenant,
                headers=_with_trace(upstream_headers(backend, ctx.tenant, ctx.principal), ctx.traceparent),
                on_notification=ctx.channel.notify if ctx.channel is not None else None,
            )
        except orjson.JSONEncodeError as exc:
            # orjson reads 1024 levels of nesting but writes only 254; the upstream's own encode is
            # the check, so the arguments are not encoded twice on every call.
            raise InvalidParams("Invalid params: arguments nested too deeply") from exc
        except UpstreamError as exc:
            log.warning("backend_call_failed", backend=backend_name, reason=exc.reason,
                        error=str(exc), request_id=ctx.request_id)
            raise BackendError(backend_name, exc.reason) from exc
        finally:
            if self.metrics is not None:
                self.metrics.upstream_done(backend_name, spec.TOOLS_CALL, time.perf_counter() - started)


def _encoded(backend: str, value: Any, ctx: RequestContext) -> orjson.Fragment:
    """The backend's reply encoded once, here, so a reply we cannot re-encode is its fault, not a 500."""
    try:
        return orjson.Fragment(orjson.dumps(value))
    except orjson.JSONEncodeError as exc:
        raise _bad_reply(backend, ctx, "reply cannot be re-encoded (nested too deeply)") from exc


def _bad_reply(backend: str, ctx: RequestContext, detail: str) -> BackendError:
    log.warning("backend_call_failed", backend=backend, reason=FailureReason.BAD_RESPONSE, error=detail,
                request_id=ctx.request_id)
    return BackendError(backend, FailureReason.BAD_RESPONSE, detail)


def _with_trace(headers: dict[str, str], traceparent: str | None) -> dict[str, str]:
    """W3C trace context rides along to HTTP backends (stdio upstreams ignore headers)."""
    if traceparent:
        headers["traceparent"] = traceparent
    return headers


class _PassThrough(Exception):
    """A backend's own JSON-RPC error, returned to the client unchanged."""

    def __init__(self, error: Any) -> None:
        super().__init__("backend error")
        self.error = error


def _outcome(exc: GatewayError) -> str:
    if isinstance(exc, BackendError):
        return exc.reason
    return {spec.METHOD_NOT_FOUND: "method_not_found", spec.INVALID_PARAMS: "invalid_params"}.get(exc.code, "error")
