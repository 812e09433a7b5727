"""The exchange core: what happens to a client's message, whichever transport carried it.

HTTP and stdio both drive an `Exchange`; they only move bytes and map errors to their own
form (an HTTP status, or a JSON-RPC error line). Here, once for both:

- `authenticate` the caller, then `admit` it: resolve its tenant, refuse a batch over its size
  limit and charge its rate limit (one unit per JSON-RPC message: a batch costs what its members would);
- `handle`: a message or a 2025-03-26 batch, run through the dispatcher. Requests run in the
  in-flight registry, so the client's `notifications/cancelled` stops them (and they get no
  reply); the client's responses go to the gateway's requests that wait for them (on another
  replica, through `forward_answer`, when the ask is not this process's);
- the client channel a transport puts in each request's context carries notifications and
  server-to-client requests back to the client (`transport.channel`).

Raised GatewayErrors are the transport's to map: an error before dispatch (not JSON-RPC, a
forbidden batch, 401, 429) has no JSON-RPC id to answer with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from gateway.audit import AUDITED_METHODS
from gateway.auth.authenticator import Authenticator
from gateway.auth.tokens import Credentials
from gateway.catalogue.audience import Sees
from gateway.catalogue.merge import Catalogue
from gateway.catalogue.refresher import CatalogueListener
from gateway.config import TenantConfig
from gateway.config.server_model import VirtualServer
from gateway.dispatch import Dispatcher
from gateway.protocol import eras, jsonrpc, spec
from gateway.protocol.errors import GatewayError, InsufficientScope, InvalidRequest, LimitReached, RateLimited
from gateway.protocol.jsonrpc import JsonObject, Message
from gateway.ratelimit import RateLimiter, retry_after_header
from gateway.tenancy import Principal, RequestContext, resolve_tenant
from gateway.transport.channel import ASK_ID_PREFIX, ForwardAnswer, PendingAsks
from gateway.transport.held import HeldReplies, budget_of
from gateway.transport.inflight import CancelledByClient, InFlight

if TYPE_CHECKING:
    from gateway.tracing.spans import RequestSpan

class Deliver(Protocol):
    """Hands a notification to every connected client of these tenants (a transport's fan-out); with
    `sees`, only to those it admits (the callers whose own view changed)."""

    def __call__(self, tenants: set[str], message: JsonObject, sees: Sees | None = None) -> object: ...


def to_both(first: Deliver, second: Deliver) -> Deliver:
    """One delivery that makes two: a list change goes to the handshake era's way (GET streams, or
    stdout) and to the 2026 listen streams alike."""

    def deliver(tenants: set[str], message: JsonObject, sees: Sees | None = None) -> None:
        first(tenants, message, sees)
        second(tenants, message, sees)

    return deliver

Reply = JsonObject | list[JsonObject] | None
"""What goes back to the client: a response, a batch's responses, or nothing."""

BATCH = "batch"
"""The context's method while it stands for a whole batch."""


REFUSED = {403: "forbidden", 429: "rate_limited"}
"""Refusals after authentication that get an audit record, by HTTP status: their outcome (as the log line's)."""

Members = Callable[[Any], "RequestSpan"]
"""Starts the SERVER span of one batch member (its decoded object): tracing on."""

Caller = tuple[Principal, TenantConfig]
"""An admitted caller: who it is and the policy it is served under (a plain tuple: made per request)."""


class Exchange:
    """The transport-free core that both client transports drive (see the module docstring)."""

    def __init__(self, *, dispatcher: Dispatcher, authenticator: Authenticator,
                 tenants: Mapping[str, TenantConfig], rate_limiter: RateLimiter | None = None,
                 inflight: InFlight | None = None, asks: PendingAsks | None = None,
                 forward_answer: ForwardAnswer | None = None) -> None:
        self.dispatcher = dispatcher
        self.authenticator = authenticator
        # Who is asking (401 when nobody we know); `params.token` is stripped from the body. Bound
        # directly, so the core adds no coroutine of its own to every request.
        self.authenticate: Callable[[Credentials, Any], Awaitable[Principal]] = authenticator.authenticate
        self.tenants = tenants
        self.rate_limiter = rate_limiter
        self.inflight = inflight if inflight is not None else InFlight()  # both have a len: empty is falsy
        self.asks = asks if asks is not None else PendingAsks()
        self.forward_answer = forward_answer  # to the other replicas (a session's POSTs may land on any)
        self.busy: dict[str, int] = {}  # requests being answered, per tenant (limits.in_flight)
        self.replies = HeldReplies()  # large replies not yet read, per tenant (limits.buffered_bytes)

    def rebind(self, *, dispatcher: Dispatcher, authenticator: Authenticator,
               tenants: Mapping[str, TenantConfig]) -> None:
        """A reload's new core: the next request is served by it (no await between the assignments)."""
        self.dispatcher, self.authenticator, self.tenants = dispatcher, authenticator, tenants
        self.authenticate = authenticator.authenticate

    # ---------------------------------------------------------------- admission

    async def admit(self, principal: Principal, data: Any = None) -> TenantConfig:
        """The principal's tenant (403 when unknown), charged its rate limit for the messages in `data` (429)."""
        tenant = resolve_tenant(principal, self.tenants)
        cost = len(data) if isinstance(data, list) else 1
        if cost > tenant.limits.batch_size:
            raise LimitReached("batch_size", tenant.limits.batch_size)
        if tenant.rate_limit is not None and self.rate_limiter is not None:
            allowed, retry_after = await self.rate_limiter.check(tenant.name, tenant.rate_limit, max(cost, 1))
            if not allowed:
                raise RateLimited("Too Many Requests", headers={"Retry-After": retry_after_header(retry_after)})
        return tenant

    def check_scopes(self, caller: Caller, method: str | None, params: Any, credentials: Credentials,
                     server: VirtualServer | None = None) -> None:
        """403 with the challenge a client steps up from, unless the token holds the scopes this request
        needs (`method` None: a GET stream or DELETE, which need only the tenant's and everyone's)."""
        if not self.dispatcher.scopes.enabled:
            return
        try:
            self.dispatcher.scopes.check(caller[0], caller[1], method, params, server)
        except InsufficientScope as exc:
            self.authenticator.require_scopes(caller[0], exc.needed, credentials)

    async def refused(self, principal: Principal, data: Any, exc: GatewayError, *, request_id: str,
                      traceparent: str | None, ctx: RequestContext | None = None,
                      reply: JsonObject | None = None) -> None:
        """The audit records (auditing on) of `data`'s audited requests, refused after their caller was
        authenticated but before the dispatcher: 403 (tenant unknown, scope missing) or 429 (rate, budgets).
        Nothing for a caller that did not authenticate: anybody could fill the trail with those. `reply`: what
        the request got, when not the HTTP refusal's body (a batch member's error)."""
        trail = self.dispatcher.audit
        if trail is None or exc.http_status not in REFUSED:
            return
        outcome, decision = REFUSED[exc.http_status], _decision(exc)
        for item in data if isinstance(data, list) else (data,):
            if type(item) is dict and type(method := item.get("method")) is str and method in AUDITED_METHODS and (
                    "id" in item):
                await trail.refused(item, reply or jsonrpc.error_response(None, exc), outcome, principal=principal,
                                    request_id=request_id, traceparent=traceparent, ctx=ctx,
                                    envelope=eras.envelope_of(item), decision=decision)

    # ---------------------------------------------------------------- messages

    async def handle(self, data: Any, ctx: RequestContext, members: Members | None = None) -> Reply:
        """The reply to one decoded body: a message, or a batch where its version allows one."""
        if isinstance(data, list):
            return await self.handle_batch(data, ctx, members)
        message = jsonrpc.parse_message(data)
        ctx.method = message.method
        return await self.handle_message(message, ctx)

    async def handle_message(self, message: Message, ctx: RequestContext) -> JsonObject | None:
        if message.is_request:
            return await self.run_request(message, ctx)
        if message.method is None:  # the client's answer to a request of ours
            await self._answered(message, ctx)
            return None
        if message.method == spec.CANCELLED:
            self._cancel(message, ctx)
        elif message.method == spec.ROOTS_LIST_CHANGED:
            await self.dispatcher.roots_changed(ctx)
        return None

    async def handle_batch(self, items: list[Any], ctx: RequestContext,
                           members: Members | None = None) -> list[JsonObject] | None:
        """JSON-RPC batches: only for clients that negotiated 2025-03-26; members run concurrently,
        each in its own SERVER span when `members` makes them (tracing on)."""
        if not items:
            raise InvalidRequest("Invalid Request: empty batch")
        if ctx.protocol_version not in spec.BATCH_VERSIONS:
            raise InvalidRequest(f"Invalid Request: batches are not allowed in {ctx.protocol_version}")
        ctx.method = BATCH
        replies = await asyncio.gather(*(self._batch_item(item, ctx, members) for item in items))
        answered = [reply for reply in replies if reply is not None]
        return answered or None

    async def _batch_item(self, item: Any, batch: RequestContext, members: Members | None) -> JsonObject | None:
        message = jsonrpc.parse_batch_item(item, not_batchable=spec.INITIALIZE)
        if not isinstance(message, Message):
            return message  # the member's error reply
        ctx = replace(batch, method=message.method)  # members run concurrently: each its own tool/outcome
        if members is not None:  # its own task (gather's): its span is current in it alone
            ctx.span = members(item)
            ctx.span.activate()
            ctx.traceparent = ctx.span.traceparent
        try:
            reply = await self.handle_message(message, ctx)
        except LimitReached as exc:  # the batch was admitted: its member gets the refusal
            ctx.outcome = "rate_limited"
            reply = jsonrpc.error_response(message.id, exc.in_batch())
            await self.refused(ctx.principal, item, exc, request_id=ctx.request_id, traceparent=ctx.traceparent,
                               ctx=ctx, reply=reply)
        finally:
            if ctx.span is not None:
                ctx.span.finish(ctx)
        if ctx.outcome != "ok":
            batch.outcome = ctx.outcome  # the batch's log line shows a member's failure
        return reply

    async def run_request(self, message: Message, ctx: RequestContext) -> JsonObject | None:
        """Dispatch one request within its tenant's in-flight budget (LimitReached beyond it)."""
        self.take_slot(ctx.tenant)
        try:
            return await self.dispatch_request(message, ctx)
        finally:
            self.release_slot(ctx.tenant)

    async def dispatch_request(self, message: Message, ctx: RequestContext) -> JsonObject | None:
        """Dispatch one request (its slot taken); one the client cancels gets no reply (spec: cancellation)."""
        try:
            return await self.inflight.run((ctx.session_id or "", message.id),
                                           self.dispatcher.handle(message, ctx))
        except CancelledByClient:
            ctx.outcome = "cancelled"
            return None

    def take_slot(self, tenant: TenantConfig) -> None:
        """One more request of `tenant` in flight; LimitReached (429) when its budget is spent, or while its
        clients leave too many bytes of replies unread (transport.held)."""
        busy = self.busy.get(tenant.name, 0)
        if busy >= tenant.limits.in_flight:
            raise LimitReached("in_flight", tenant.limits.in_flight)
        if self.replies.held and self.replies.over(tenant):
            raise LimitReached("buffered_bytes", budget_of(tenant))
        self.busy[tenant.name] = busy + 1

    def release_slot(self, tenant: TenantConfig) -> None:
        self.busy[tenant.name] -= 1

    async def _answered(self, message: Message, ctx: RequestContext) -> None:
        """Hand the answer to the ask waiting for it: here, or on the replica that asked."""
        if self.asks.answer(ctx.session_id or "", message.raw) or self.forward_answer is None:
            return
        if ctx.session_id and isinstance(message.id, str) and message.id.startswith(ASK_ID_PREFIX):
            await self.forward_answer(ctx.session_id, message.raw)

    def _cancel(self, message: Message, ctx: RequestContext) -> None:
        request_id = (message.params or {}).get("requestId")
        if isinstance(request_id, str | int) and not isinstance(request_id, bool):
            self.inflight.cancel((ctx.session_id or "", request_id))

    # ---------------------------------------------------------------- catalogue changes

    def list_changed_listener(self, deliver: Deliver,
                              tenants: Callable[[], list[TenantConfig]] | None = None) -> CatalogueListener:
        """Tell the clients whose tenant view of tools, prompts or resources changed to list that kind again.

        `tenants` narrows the check (stdio serves one tenant); by default every configured one.
        """
        views = self.dispatcher.catalogue.views
        watched = tenants or (lambda: list(self.tenants.values()))

        async def listener(old: Catalogue, new: Catalogue) -> None:
            hearing = watched()
            if not hearing:  # nobody to tell: not even the changed tools are worth finding
                return
            for method, audience in views.changes(old, new, hearing).items():
                deliver(audience.tenants, {"jsonrpc": "2.0", "method": method}, audience.sees)

        return listener


def _decision(exc: GatewayError) -> dict[str, str] | None:
    """The policy decision behind a refusal, as an audit record's `policy` names it: a scope the token lacks,
    or a tenant nobody configured; None for a rate or a budget (its `error.reason` says `limit`)."""
    if isinstance(exc, InsufficientScope) or isinstance(exc.__context__, InsufficientScope):
        return {"denied": "scope"}
    return {"denied": "tenant"} if exc.http_status == 403 else None
