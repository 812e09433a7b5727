"""The MCP Streamable HTTP endpoint: POST, GET and DELETE on `server.path`.

This module only does I/O and protocol checks; `Dispatcher.handle` does the MCP work.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import replace
from typing import Any

from aiohttp import web

from gateway import keys
from gateway.errors import (
    BadRequest,
    InvalidRequest,
    NotAcceptable,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    UnsupportedMediaType,
)
from gateway.logs import stream_headers
from gateway.protocol import jsonrpc, spec
from gateway.protocol.jsonrpc import JsonObject, Message
from gateway.protocol.sse import encode_event
from gateway.ratelimit import retry_after_header
from gateway.tenancy import Principal, RequestContext, resolve_tenant
from gateway.transport.inflight import CancelledByClient
from gateway.transport.sessions import Session

MAX_ACCEPT_CHARS = 1024
"""Longer Accept headers are cut: no real client sends one, and the cache keys stay small."""
KEEPALIVE_SECONDS = 15.0
"""An SSE comment this often keeps idle GET streams alive through proxies."""
SSE_HEADERS = {"Content-Type": spec.SSE, "Cache-Control": "no-cache"}


def setup_mcp_routes(app: web.Application, path: str) -> None:
    app.router.add_post(path, handle_post)
    app.router.add_get(path, handle_get)
    app.router.add_delete(path, handle_delete)


# ---------------------------------------------------------------- POST


async def handle_post(request: web.Request) -> web.StreamResponse:
    _require_json_content(request)
    _require_accept(request, spec.JSON, spec.SSE)
    data = jsonrpc.loads(await _read_body(request))
    principal = await _authenticate(request, data)
    if isinstance(data, list):
        return await _post_batch(request, principal, data)
    message = jsonrpc.parse_message(data)
    if message.method == spec.INITIALIZE:
        return await _post_initialize(request, principal, message)
    session = await _session(request, principal)
    ctx = _context(request, principal, session, message.method)
    if not message.is_request:
        _on_notification(request, message, session)
        await request.app[keys.DISPATCHER].handle(message, ctx)
        return web.Response(status=202)
    try:
        if _wants_stream(request, message):
            return await _reply_as_stream(request, message, ctx)
        return _json(await _handle(request, message, ctx))
    except CancelledByClient:
        ctx.outcome = "cancelled"
        return web.Response(status=202)  # no JSON-RPC response for a cancelled request


async def _handle(request: web.Request, message: Message, ctx: RequestContext) -> JsonObject | None:
    """Dispatch one request, cancellable by the client's notifications/cancelled."""
    key = (ctx.session_id or "", message.id)
    return await request.app[keys.INFLIGHT].run(key, request.app[keys.DISPATCHER].handle(message, ctx))


def _on_notification(request: web.Request, message: Message, session: Session) -> None:
    if message.method == spec.CANCELLED:
        request_id = (message.params or {}).get("requestId")
        if isinstance(request_id, str | int) and not isinstance(request_id, bool):
            request.app[keys.INFLIGHT].cancel((session.id, request_id))


async def _post_initialize(request: web.Request, principal: Principal, message: Message) -> web.Response:
    if not message.is_request:
        raise InvalidRequest("Invalid Request: initialize must be a request")
    requested = (message.params or {}).get("protocolVersion")
    version = spec.negotiate_version(requested)
    session = await request.app[keys.SESSIONS].create(principal, version)
    ctx = _context(request, principal, session, message.method)
    reply = await request.app[keys.DISPATCHER].handle(message, ctx)
    return _json(reply, headers={spec.SESSION_HEADER: session.id})


async def _post_batch(request: web.Request, principal: Principal, items: list[Any]) -> web.Response:
    """JSON-RPC batches: accepted only on sessions that negotiated 2025-03-26."""
    if not items:
        raise InvalidRequest("Invalid Request: empty batch")
    session = await _session(request, principal)
    if session.protocol_version not in spec.BATCH_VERSIONS:
        raise InvalidRequest(f"Invalid Request: batches are not allowed in {session.protocol_version}")
    ctx = _context(request, principal, session, "batch")
    replies = await asyncio.gather(*(_batch_item(request, item, ctx) for item in items))
    answered = [r for r in replies if r is not None]
    return _json(answered) if answered else web.Response(status=202)


async def _batch_item(request: web.Request, item: Any, ctx: RequestContext) -> JsonObject | None:
    message = jsonrpc.parse_batch_item(item, not_batchable=spec.INITIALIZE)
    if not isinstance(message, Message):
        return message  # the member's error reply
    item = replace(ctx, method=message.method)  # items run concurrently: each its own tool/outcome
    reply = await request.app[keys.DISPATCHER].handle(message, item)
    ctx.outcome = ctx.outcome if item.outcome == "ok" else item.outcome  # the log line shows a failure
    return reply


def _wants_stream(request: web.Request, message: Message) -> bool:
    """Reply over SSE only when the client asked for progress on this request."""
    meta = (message.params or {}).get("_meta")
    return isinstance(meta, dict) and "progressToken" in meta


async def _reply_as_stream(request: web.Request, message: Message, ctx: RequestContext) -> web.StreamResponse:
    """Relay this request's notifications (progress) as SSE, then its response, then end."""
    response = web.StreamResponse(headers=stream_headers(request, SSE_HEADERS))
    await response.prepare(request)
    lock = asyncio.Lock()

    async def notify(notification: JsonObject) -> None:
        async with lock:
            await response.write(encode_event(jsonrpc.dumps(notification)))

    ctx.notify = notify
    try:
        reply = await _handle(request, message, ctx)
    except CancelledByClient:
        ctx.outcome = "cancelled"
        await response.write_eof()  # the stream ends without a response, as the spec asks
        return response
    async with lock:
        await response.write(encode_event(jsonrpc.dumps(reply)))
    await response.write_eof()
    return response


# ---------------------------------------------------------------- GET and DELETE


async def handle_get(request: web.Request) -> web.StreamResponse:
    """The session's server-to-client stream (e.g. notifications/tools/list_changed)."""
    _require_accept(request, spec.SSE)
    principal = await _authenticate(request, None)
    session = await _session(request, principal)
    hub = request.app[keys.STREAMS]
    queue = hub.open(session.id, session.tenant)
    try:
        response = web.StreamResponse(headers=stream_headers(request, SSE_HEADERS))
        await response.prepare(request)
        last_event_id = request.headers.get(spec.LAST_EVENT_ID_HEADER)
        for event_id, data in hub.replay(session.id, last_event_id) if last_event_id else ():
            await response.write(encode_event(data, event_id=event_id))
        await _pump(response, queue)
        return response
    finally:
        hub.detach(session.id, queue)


async def _pump(response: web.StreamResponse, queue: asyncio.Queue[tuple[str, bytes]]) -> None:
    while True:
        try:
            event_id, data = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
        except TimeoutError:
            await response.write(b": keepalive\n\n")
            continue
        if not data:  # the session ended or the gateway is shutting down
            return
        await response.write(encode_event(data, event_id=event_id))


async def handle_delete(request: web.Request) -> web.Response:
    principal = await _authenticate(request, None)
    session = await _session(request, principal)
    await request.app[keys.SESSIONS].delete(session.id)
    request.app[keys.STREAMS].forget(session.id)
    return web.Response(status=204)


# ---------------------------------------------------------------- checks


def _require_json_content(request: web.Request) -> None:
    if request.content_type != spec.JSON:
        raise UnsupportedMediaType("Unsupported Media Type: Content-Type must be application/json")


def _require_accept(request: web.Request, *types: str) -> None:
    offered = _media_types(request.headers.get("Accept", "")[:MAX_ACCEPT_CHARS])
    if "*/*" in offered:
        return
    for media in types:
        if media not in offered and f"{media.split('/')[0]}/*" not in offered:
            raise NotAcceptable(f"Not Acceptable: Accept must include {' and '.join(types)}")


@functools.lru_cache(maxsize=256)
def _media_types(accept: str) -> frozenset[str]:
    """The media types an Accept header lists (cached: a client sends the same one every time)."""
    return frozenset(part.split(";", 1)[0].strip().lower() for part in accept.split(","))


async def _read_body(request: web.Request) -> bytes:
    limit = request.app[keys.CONFIG].server.max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(f"Payload Too Large: the limit is {limit} bytes")
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        raise PayloadTooLarge(f"Payload Too Large: the limit is {limit} bytes") from exc


async def _authenticate(request: web.Request, data: Any) -> Principal:
    """Every request is authenticated, and its tenant must exist (403 otherwise)."""
    principal = await request.app[keys.AUTHENTICATOR].authenticate(request, data)
    request[keys.PRINCIPAL] = principal
    tenant = request[keys.TENANT] = resolve_tenant(principal, request.app[keys.CONFIG].tenants)
    if tenant.rate_limit is not None:
        allowed, retry_after = await request.app[keys.RATE_LIMITER].check(tenant.name, tenant.rate_limit)
        if not allowed:
            raise RateLimited("Too Many Requests", headers={"Retry-After": retry_after_header(retry_after)})
    return principal


async def _session(request: web.Request, principal: Principal) -> Session:
    """The request's session; missing → 400, unknown, ended or someone else's → 404."""
    session_id = request.headers.get(spec.SESSION_HEADER)
    if not session_id:
        raise BadRequest("Bad Request: Mcp-Session-Id header is required")
    _check_version_header(request)
    session = await request.app[keys.SESSIONS].get(session_id)
    if session is None or not session.belongs_to(principal):
        raise NotFound("Not Found: unknown or ended session")
    return session


def _check_version_header(request: web.Request) -> None:
    version = request.headers.get(spec.VERSION_HEADER)
    if version is not None and version not in spec.SUPPORTED_VERSIONS:
        raise BadRequest(f"Bad Request: unsupported MCP-Protocol-Version {version[:40]!r}")


def _context(request: web.Request, principal: Principal, session: Session,
             method: str | None) -> RequestContext:
    ctx = RequestContext(principal=principal, tenant=request[keys.TENANT],
                         request_id=request[keys.REQUEST_ID], method=method,
                         protocol_version=session.protocol_version, session_id=session.id,
                         traceparent=request.get(keys.TRACEPARENT))
    request[keys.CONTEXT] = ctx
    return ctx


def _json(reply: Any, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=jsonrpc.dumps(reply), content_type=spec.JSON, headers=headers)



