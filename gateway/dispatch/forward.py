"""Sending one client request on to the backend that owns it, and taking its reply back.

Every forwarded method (tools/call, prompts/get, resources/read, completion/complete) goes through
`Forwarder.forward`: the tenant's upstream session (by the client's declared capabilities too) and
headers, trace context, the backend's notifications (log messages filtered by the client's level)
and questions to the client (relay.py), the backend's failures as BackendError, its own JSON-RPC
errors passed through unchanged, and the upstream latency per backend and method.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
import structlog

from gateway.client_logs import client_notifier
from gateway.config import Backend, Config
from gateway.errors import BackendError, FailureReason, InvalidParams
from gateway.protocol.capabilities import WITH_TASKS, declares_tasks
from gateway.protocol.jsonrpc import JsonObject
from gateway.protocol.request_state import Binding, InvalidState, Passed, Principal, TaskRef
from gateway.relay import ClientRelay
from gateway.tenancy import RequestContext, upstream_headers
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
                 on_served: Callable[[str], None] | None = None) -> None:
        """`on_served(backend)` hears of every reply a backend gave (its lists may have changed)."""
        self.pool = pool
        self.metrics = metrics
        self._on_served = on_served
        self._backends = {backend.name: backend for backend in config.backends}  # looked up on every call

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
            if "extensions" in declared and ctx.seal is not None and declares_tasks(declared):
                flags = flags | WITH_TASKS  # the client's own declaration, on to the backend: handles can be sealed
        started = time.perf_counter()
        relay = ClientRelay(ctx, timeout=backend.timeout_seconds, metrics=self.metrics)  # the backend's questions
        try:
            reply = await self.pool.get(backend.name).request(
                method, params, timeout=backend.timeout_seconds,
                session_key=ctx.principal.tenant, capabilities=flags,
                headers=_with_trace(upstream_headers(backend, ctx.tenant, ctx.principal), ctx.traceparent),
                on_notification=client_notifier(ctx), on_request=relay,
            )
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


def _with_trace(headers: dict[str, str], traceparent: str | None) -> dict[str, str]:
    """W3C trace context rides along to HTTP backends (stdio upstreams ignore headers)."""
    if traceparent:
        headers["traceparent"] = traceparent
    return headers
