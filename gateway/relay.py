"""A backend's requests to the client of the call it serves: sampling, elicitation, roots.

A backend serving a forwarded call may ask that call's client something. The upstream hands
such a request to the call's `ClientRelay`, which checks that the client declared what the
request needs (`protocol.capabilities.needed`), asks the client through the request's channel
(the gateway mints the id the client sees), and sends the client's answer back to the backend
under the backend's own id. A client that did not declare it, cannot be reached or does not
answer within the call's deadline: the backend gets a JSON-RPC error, the first at once.
Each relayed request is counted by kind and outcome, and listed on the call's log line
(`client_requests`). When the call ends, questions still open are withdrawn (the client is
told): their answers could only reach a backend that no longer waits for them.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import structlog

from gateway.protocol import spec
from gateway.protocol.capabilities import declared, needed
from gateway.tenancy import ChannelClosed, RequestContext
from gateway.upstream.base import Answer, JsonObject, refusal

if TYPE_CHECKING:
    from gateway.metrics import Metrics
    from gateway.tracing.spans import CallSpan, RelaySpans

log = structlog.get_logger("gateway.relay")

DESCRIBED = {spec.SAMPLING_CREATE_MESSAGE: "Sampling", spec.ELICITATION_CREATE: "Elicitation",
             spec.ROOTS_LIST: "List roots"}
"""How an unsupported request is named to the backend (as the SDK's client names it)."""


class ClientRelay:
    """Relays one call's backend requests to the call's client (see the module docstring)."""

    __slots__ = ("_ctx", "_metrics", "_span", "_tasks", "_timeout")

    def __init__(self, ctx: RequestContext, *, timeout: float, metrics: Metrics | None,
                 span: CallSpan | None = None) -> None:
        """`span`: the call's CLIENT span (tracing on): each relayed request gets its spans under it."""
        self._ctx = ctx
        self._timeout = timeout
        self._metrics = metrics
        self._span = span
        self._tasks: set[asyncio.Task[None]] | None = None  # made on first use: most calls never ask

    def __call__(self, request: JsonObject, answer: Answer) -> None:
        if self._tasks is None:
            self._tasks = set()
        task = asyncio.create_task(self._relay(request, answer), name=f"relay:{request['method']}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def passes_input_required(self) -> bool:
        """A 2026 client answers a 2026 backend's InputRequiredResult itself (upstream/input_rounds.py)."""
        return self._ctx.envelope is not None

    @property
    def declared(self) -> frozenset[str]:
        """What this call's client can answer: a 2026 client's own declaration, else its session's flags."""
        envelope = self._ctx.envelope
        return declared(envelope.client_capabilities) if envelope is not None else self._ctx.capabilities

    @property
    def asking(self) -> bool:
        """Whether a question to the client is still open (checked so most calls skip `aclose`)."""
        return bool(self._tasks)

    async def aclose(self) -> None:
        """The call is over: withdraw the questions still waiting for the client, before its reply."""
        tasks = list(self._tasks or ())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _relay(self, request: JsonObject, answer: Answer) -> None:
        spans = self._span.relay(request) if self._span is not None and self._span.server is not None else None
        outcome, reply = await self._ask(request, spans)
        if spans is not None:
            spans.end(outcome, reply)
        self._ctx.extra.setdefault("client_requests", []).append(f"{request['method']}:{outcome}")
        if self._metrics is not None:
            self._metrics.client_request(request["method"], outcome)
        log.debug("client_request_relayed", method=request["method"], outcome=outcome,
                  backend=self._ctx.backend, request_id=self._ctx.request_id)
        await answer(reply)

    async def _ask(self, request: JsonObject, spans: RelaySpans | None) -> tuple[str, JsonObject]:
        """(outcome, the response for the backend)."""
        method, params = request["method"], request.get("params")
        if spans is not None:  # the client hears the gateway's span as the request's parent
            params = spans.params(params if isinstance(params, dict) else None)
        channel = self._ctx.channel
        if channel is None:
            return "unreachable", _failure(request, "the call has no way back to its client")
        missing = needed(method, params) - self._ctx.capabilities
        if missing:
            undeclared = ", ".join(sorted(missing))
            return "undeclared", refusal(request, f"{DESCRIBED[method]} not supported: the client did not declare "
                                                  f"{undeclared}")
        try:
            response = await channel.ask(method, params if isinstance(params, dict) else None, timeout=self._timeout)
        except TimeoutError:
            return "timeout", _failure(request, "the client did not answer in time")
        except ChannelClosed:
            return "unreachable", _failure(request, "the client cannot be reached")
        return _forwarded(request, response)


def _forwarded(request: JsonObject, response: JsonObject) -> tuple[str, JsonObject]:
    """The client's answer under the backend's id: its result, or its error, unchanged."""
    if "result" in response:
        return "ok", {"jsonrpc": "2.0", "id": request["id"], "result": response["result"]}
    error: Any = response.get("error")
    return "error", {"jsonrpc": "2.0", "id": request["id"], "error": error}


def _failure(request: JsonObject, why: str) -> JsonObject:
    error = {"code": spec.INTERNAL_ERROR, "message": f"{request['method']} failed: {why}"}
    return {"jsonrpc": "2.0", "id": request["id"], "error": error}
