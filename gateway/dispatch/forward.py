"""Sending one client request on to the backend that owns it, and taking its reply back.

Every forwarded method (tools/call, prompts/get, resources/read, completion/complete) goes through
`Forwarder.forward`: the tenant's upstream session (by the client's declared capabilities too) and
headers, trace context, the backend's notifications (log messages filtered by the client's level)
and questions to the client (relay.py), the backend's failures as BackendError, its own JSON-RPC
errors passed through unchanged, and the upstream latency per backend and method.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
import structlog

from gateway.client_logs import client_notifier
from gateway.config import Backend, BackendAuth, Config
from gateway.dispatch.connect import Connect
from gateway.oauth.outbound import AuthorizationRequired, BackendCredentials, CredentialError
from gateway.protocol.capabilities import FROM_2026, FROM_2026_WITH_TASKS, declares_tasks
from gateway.protocol.errors import BackendError, FailureReason, InvalidParams
from gateway.protocol.jsonrpc import JsonObject
from gateway.protocol.request_state import Binding, InvalidState, Passed, Principal, TaskRef
from gateway.relay import ClientRelay
from gateway.tenancy import RequestContext, upstream_headers
from gateway.tracing.context import TRACEPARENT, TRACESTATE, with_context
from gateway.upstream.base import UpstreamError
from gateway.upstream.modern import INPUT_REQUIRED, TASK
from gateway.upstream.pool import UpstreamPool

if TYPE_CHECKING:
    from gateway.metrics import Metrics

log = structlog.get_logger("gateway.dispatch")


class PassThrough(Exception):
    """A backend's own JSON-RPC error, returned to the client unchanged."""

    def __init__(self, error: Any) -> None:
        super().__init__("backend error")
        self.error = error


class Forwarder:
    def __init__(self, *, config: Config, pool: UpstreamPool, metrics: Metrics | None = None,
                 on_served: Callable[[str], None] | None = None, credentials: BackendCredentials | None = None) -> None:
        """`on_served(backend)` hears of every reply a backend gave (its lists may have changed); `credentials`
        get the OAuth tokens of backends with an `auth` (None: no backend has one)."""
        self.pool = pool
        self.metrics = metrics
        self._on_served = on_served
        self._backends = {backend.name: backend for backend in config.backends}  # looked up on every call
        self.credentials = credentials
        self.connect = Connect(credentials, wait_seconds=config.oauth.wait_seconds) if credentials else None

    def backends(self) -> list[Backend]:
        return list(self._backends.values())

    def knows(self, name: str) -> bool:
        return name in self._backends

    def backend(self, name: str) -> Backend:
        """A configured backend (catalogue entries only name configured backends)."""
        return self._backends[name]

    async def forward(self, backend: Backend, method: str, params: JsonObject, ctx: RequestContext) -> JsonObject:
        """The backend's result object; its JSON-RPC error is raised as PassThrough.

        One coroutine from here to the upstream: this is every tools/call's path. `params` is this
        call's own dict (a 2026 retry's state is put in or taken out here).
        """
        flags = ctx.capabilities
        if ctx.envelope is not None:  # its envelope left its `_meta` on admission (eras.take_envelope)
            if ctx.passed is not None or "requestState" in params:
                _retry_state(params, ctx.passed, backend.name)
            declared = ctx.envelope.client_capabilities
            # The client's era (a dual-era backend gets the request at 2026) and its own tasks declaration, on to
            # the backend when handles can be sealed.
            tasks = "extensions" in declared and ctx.seal is not None and declares_tasks(declared)
            flags = flags | (FROM_2026_WITH_TASKS if tasks else FROM_2026)
        upstream = self.pool.get(backend.name)
        headers = upstream_headers(backend, ctx.tenant, ctx.principal)
        session_key = ctx.principal.tenant
        oauth = self.credentials.auth_for(backend.name, ctx.tenant.name) if self.credentials is not None else None
        if oauth is not None:  # the backend's token, got for this caller (gateway.oauth)
            sent_elsewhere = await self._bearer(backend, oauth, method, headers, ctx)
            if sent_elsewhere is not None:
                return sent_elsewhere  # a tool error sending the user to authorize the gateway
            session_key = self.credentials.session_key(oauth, ctx.principal)  # type: ignore[union-attr]
        span = ctx.span
        if span is None:  # tracing off: the request's own trace context goes on as it came
            call = None
            _with_trace(headers, params, ctx)
        else:
            call = span.call(backend, method, params, headers, upstream=upstream)
            call.activate()  # an upstream retry is noted on it
        started = time.perf_counter()
        relay = ClientRelay(ctx, timeout=backend.timeout_seconds, metrics=self.metrics, span=call)
        reply: JsonObject | None = None
        try:
            if oauth is None:  # the usual call: no coroutine more than before outbound OAuth
                reply = await upstream.request(
                    method, params, timeout=backend.timeout_seconds,
                    session_key=session_key, capabilities=flags, headers=headers,
                    on_notification=client_notifier(ctx), on_request=relay,
                )
            else:
                reply = await self._with_token(backend, method, params, ctx, (session_key, flags), headers, relay,
                                               oauth)
        except orjson.JSONEncodeError as exc:
            # orjson reads 1024 levels of nesting but writes only 254; the upstream's own encode is
            # the check, so the arguments are not encoded twice on every call.
            raise InvalidParams("Invalid params: arguments nested too deeply") from exc
        except UpstreamError as exc:
            log.warning("backend_call_failed", backend=backend.name, reason=exc.reason,
                        error=str(exc), request_id=ctx.request_id)
            raise BackendError(backend.name, exc.reason) from exc
        finally:
            if relay.asking:  # questions still open are withdrawn before the reply goes out
                await relay.aclose()
            if self.metrics is not None:
                self.metrics.upstream_done(backend.name, method, time.perf_counter() - started)
            if call is not None:
                call.settle(reply, sys.exc_info()[1])
        if self._on_served is not None:
            self._on_served(backend.name)
        if "error" in reply:
            ctx.outcome = "backend_error"
            raise PassThrough(encoded(backend.name, reply["error"], ctx))
        result = reply.get("result")
        if not isinstance(result, dict):  # every MCP result is an object; anything else is garbage
            raise bad_reply(backend.name, ctx, f"{method} result is not an object")
        if ctx.envelope is not None and "resultType" in result:  # a 2026 backend's, passed on (upstream.modern)
            if result["resultType"] == INPUT_REQUIRED:
                _sealed(result, ctx, backend.name)
            elif result["resultType"] == TASK:
                _task_handle(result, ctx, backend.name)
        return result

    async def _with_token(self, backend: Backend, method: str, params: JsonObject, ctx: RequestContext,
                          key: tuple[str, frozenset[str]], headers: dict[str, str], relay: ClientRelay,
                          oauth: BackendAuth) -> JsonObject:
        """The upstream request of a backend with OAuth; a token it refuses (401/403) is dropped and the call
        sent once more with a new one (the backend did not run it)."""
        upstream = self.pool.get(backend.name)
        for attempt in (1, 2):
            try:
                return await upstream.request(method, params, timeout=backend.timeout_seconds, session_key=key[0],
                                              capabilities=key[1], headers=headers,
                                              on_notification=client_notifier(ctx), on_request=relay)
            except UpstreamError as exc:
                if exc.reason != FailureReason.UNAUTHORIZED or attempt == 2:
                    raise
            assert self.credentials is not None
            await self.credentials.refused(backend.name, oauth, ctx.principal)
            if await self._bearer(backend, oauth, method, headers, ctx) is not None:
                break  # the grant could not be renewed and the user has not authorized again
        raise UpstreamError(FailureReason.UNAUTHORIZED, f"{backend.name}: the backend refused the gateway's token")

    async def _bearer(self, backend: Backend, oauth: BackendAuth, method: str, headers: dict[str, str],
                      ctx: RequestContext) -> JsonObject | None:
        """Put the backend's token in `headers`; or the tool error that sends the user to authorize first."""
        assert self.credentials is not None and self.connect is not None
        for _ in range(2):  # a second time once the user has authorized
            try:
                headers["Authorization"] = await self.credentials.bearer(backend.name, oauth, ctx.principal)
                return None
            except CredentialError as exc:
                ctx.outcome = FailureReason.UNAUTHORIZED
                raise BackendError(backend.name, FailureReason.UNAUTHORIZED, exc.reason, shown=exc.reason) from None
            except AuthorizationRequired as needed:
                answer = await self.connect.authorized(needed, method, ctx)
                if answer is not None:
                    return answer
        raise BackendError(backend.name, FailureReason.UNAUTHORIZED, shown="the authorization was not kept")


def encoded(backend: str, value: Any, ctx: RequestContext, tail: bytes = b"") -> orjson.Fragment:
    """The backend's reply encoded once, here, so a reply we cannot re-encode is its fault, not a 500.

    A `tail` replaces the closing brace of an encoded object (`eras.completion_tail`)."""
    try:
        return orjson.Fragment(orjson.dumps(value)[:-1] + tail if tail else orjson.dumps(value))
    except orjson.JSONEncodeError as exc:
        raise bad_reply(backend, ctx, "reply cannot be re-encoded (nested too deeply)") from exc


def bad_reply(backend: str, ctx: RequestContext, detail: str) -> BackendError:
    log.warning("backend_call_failed", backend=backend, reason=FailureReason.BAD_RESPONSE, error=detail,
                request_id=ctx.request_id)
    return BackendError(backend, FailureReason.BAD_RESPONSE, detail)


def _retry_state(params: JsonObject, passed: Passed | None, backend: str) -> None:
    """A retry's state reaches only the 2026 backend whose own state it carried (transport.rounds opened
    the gateway's seal around it), as the backend made it; no other backend sees it, nor its answers."""
    if passed is None:  # answers sent with a first call may serve a 2026 backend (the upstream drops them for
        params.pop("requestState", None)  # a handshake-era one, upstream.base.handshake_params)
    elif passed.backend != backend:  # the catalogue now routes the call elsewhere (a reload)
        raise InvalidState(f"the state of backend {passed.backend!r}, not of {backend!r}")
    elif passed.state is None:
        params.pop("requestState", None)
    else:
        params["requestState"] = passed.state


def _sealed(result: JsonObject, ctx: RequestContext, backend: str) -> None:
    """A 2026 backend's InputRequiredResult goes to its 2026 client with its keys as they are, its
    `requestState` (one is added when it gave none) inside the gateway's seal: the retry comes back here."""
    ctx.outcome = "input_required"
    if ctx.seal is not None:  # None: no rounds here (stdio), the state goes as the backend made it
        assert ctx.method is not None  # bound as a round's state is: the retry must repeat the request
        binding = Binding.of(sealed_for(ctx), ctx.method, ctx.params or {})
        result["requestState"] = ctx.seal.seal(Passed(backend, result.get("requestState")), binding)


def _task_handle(result: JsonObject, ctx: RequestContext, backend: str) -> None:
    """A 2026 backend's CreateTaskResult goes to its client with the taskId inside the gateway's seal:
    the handle names the backend and its taskId, and opens for this principal only (dispatch.tasks)."""
    task_id = result.get("taskId")
    if not isinstance(task_id, str) or ctx.seal is None:
        raise bad_reply(backend, ctx, "a task without a taskId")
    ctx.outcome = "task"
    result["taskId"] = ctx.seal.seal_task(TaskRef(backend, task_id), sealed_for(ctx))


def sealed_for(ctx: RequestContext) -> Principal:
    """Whom a state or task handle sealed in this request is bound to (protocol.request_state)."""
    return ctx.principal.tenant, ctx.principal.subject


def _with_trace(headers: dict[str, str], params: JsonObject, ctx: RequestContext) -> None:
    """Tracing off: the request's trace context goes to the backend as it came, in `_meta` (every transport,
    both eras) and in the headers (HTTP backends; stdio upstreams ignore headers)."""
    traceparent = ctx.traceparent
    if traceparent is None:
        return
    headers[TRACEPARENT] = traceparent
    if ctx.tracestate:
        headers[TRACESTATE] = ctx.tracestate
    meta = params.get("_meta")
    if meta is None and not ctx.tracestate:  # the usual request: no `_meta` of its own
        params["_meta"] = {TRACEPARENT: traceparent}
    elif type(meta) is not dict or meta.get(TRACEPARENT) != traceparent:  # a new dict: the client's stays as it came
        params["_meta"] = with_context(meta, traceparent, ctx.tracestate)
