"""Multi-round trips: a 2026-07-28 client answers, by retrying, what a handshake-era backend asks during a call.

A 2026 client takes no server-to-client requests (../shared/PROTOCOL-2026.md §B.3). So when the
backend serving its tools/call, prompts/get or resources/read asks for sampling, elicitation or
roots, the call is parked here as a `Round`: the backend call stays open, waiting, and the client
gets an `InputRequiredResult` carrying those requests (under keys the gateway mints) and a sealed
`requestState` (protocol/request_state.py). Its retry (same method and arguments, plus
`inputResponses` and the state) is verified, each response goes back to the backend under the
backend's own id (relay.py, as for a session's client), and the retry gets the final result, or
the next round.

- Only what the request declared is relayed: relay.py refuses anything else at once.
- A state is single-use: it names the round's step, and a round resumes for one retry at a time.
- A round holds its tenant's in-flight slot from its first request to its end; it ends when the
  call does, when its client closes a stream it waits on, or when no retry comes within
  `mrtr.round_seconds` (its backend call is then cancelled: the backend gets notifications/cancelled).
- After `mrtr.max_rounds` InputRequiredResults, a backend's further questions are refused.
- A state sealed by another replica is passed on to it (`forward`, set by rounds_remote.py).
- A 2026 backend's own InputRequiredResult is not held: it reaches the client as the backend made it,
  but with the backend's `requestState` inside the gateway's seal (`Passed`, dispatch/forward.py). Its
  retry, opened here on any replica, goes to that backend with that state (`_pass`).
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import structlog

from gateway.config import Config, TenantConfig
from gateway.protocol import jsonrpc, spec
from gateway.protocol.errors import InternalError, InvalidParams
from gateway.protocol.jsonrpc import JsonObject, Message, RequestId
from gateway.protocol.request_state import Binding, InvalidState, Passed, RoundRef, StateSeal
from gateway.tenancy import ChannelClosed, RequestContext
from gateway.transport.channel import ClientChannel, PendingAsks
from gateway.transport.exchange import Exchange

log = structlog.get_logger("gateway.transport")

BATCH_SECONDS = 0.02
"""Questions a backend asks within this long of one another go out in the same round."""
KINDS = {spec.SAMPLING_CREATE_MESSAGE: "sampling", spec.ELICITATION_CREATE: "elicitation", spec.ROOTS_LIST: "roots"}
"""How the keys the gateway mints for input requests begin."""
LEGACY_ONLY = ("elicitationId",)
"""Params 2026 removed from input requests (URL elicitation completes by the retry, not by an id)."""
RELATED_TASK = "io.modelcontextprotocol/related-task"

Run = Callable[[Message, RequestContext], Awaitable[JsonObject | None]]


@dataclass(frozen=True, slots=True)
class Waiting:
    """The request waiting on a round now: where its notifications go, its id and progress token, its log line."""

    stream: ClientChannel
    request_id: RequestId
    progress: Any = None  # its `_meta.progressToken`: the backend's progress goes out under it
    ctx: RequestContext | None = None  # None: a retry on another replica, whose line is written there

    @classmethod
    def of(cls, message: Message, stream: ClientChannel, ctx: RequestContext) -> Waiting:
        meta = (message.params or {}).get("_meta")
        assert message.id is not None
        return cls(stream, message.id, meta.get("progressToken") if isinstance(meta, dict) else None, ctx)


Forward = Callable[[RoundRef, dict[str, JsonObject], Waiting], Awaitable[JsonObject]]
"""Resumes a round another replica holds, and returns its reply (rounds_remote.py)."""


@dataclass(frozen=True, slots=True)
class RoundSettings:
    round_seconds: float
    max_rounds: int
    server_info: Any  # what an InputRequiredResult names as its server (pre-encoded)
    take_slot: Callable[[TenantConfig], None]  # the tenant's in-flight budget (Exchange)
    release_slot: Callable[[TenantConfig], None]


class Round:
    """One call held across rounds: its dispatch, its open questions, and the request waiting on it now."""

    __slots__ = ("asks", "attached", "binding", "changed", "ctx", "held_progress", "id", "keys", "step", "task",
                 "timer")

    def __init__(self, round_id: str, ctx: RequestContext, binding: Binding) -> None:
        self.id, self.ctx, self.binding = round_id, ctx, binding
        self.asks: dict[str, tuple[JsonObject, asyncio.Future[JsonObject]]] = {}  # key -> (input request, answer)
        self.keys = itertools.count(1)
        self.changed = asyncio.Event()  # a question came, or the call ended
        self.step = 0  # InputRequiredResults given so far
        self.attached: Waiting | None = None
        self.held_progress: JsonObject | None = None  # the latest reported while it was parked, for the retry
        self.task: asyncio.Task[JsonObject | None] | None = None
        self.timer: asyncio.TimerHandle | None = None

    def open_asks(self) -> dict[str, JsonObject]:
        return {key: request for key, (request, answer) in self.asks.items() if not answer.done()}


class RoundChannel(ClientChannel):
    """A held call's way back: a question becomes an input request of its next round; a notification
    goes to the request waiting on the round now, its progress under that request's own token (a retry
    has its own, or asked for none). While the round is parked no request waits: the latest progress is
    kept for the retry (it tells where the call stands), log messages are dropped."""

    __slots__ = ("round",)

    def __init__(self, round_: Round) -> None:
        super().__init__(PendingAsks(), "")  # never used: `ask` is this channel's own
        self.round = round_

    async def send(self, message: JsonObject) -> None:
        attached = self.round.attached
        if attached is None:
            if message.get("method") == spec.PROGRESS:
                self.round.held_progress = message
            return
        if message.get("method") == spec.PROGRESS:
            if attached.progress is None:
                return
            message = {**message, "params": {**message.get("params", {}), "progressToken": attached.progress}}
        await attached.stream.notify(message)

    async def ask(self, method: str, params: JsonObject | None, *, timeout: float) -> JsonObject:  # noqa: ASYNC109
        round_ = self.round
        key = f"{KINDS.get(method, 'input')}-{next(round_.keys)}"
        answer: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        round_.asks[key] = (input_request(method, params), answer)
        round_.changed.set()
        try:
            async with asyncio.timeout(timeout):
                return await answer
        finally:
            del round_.asks[key]


class Rounds:
    """The calls this replica holds across rounds, by round id."""

    def __init__(self, run: Run, seal: StateSeal, settings: RoundSettings, *, replica: str) -> None:
        self.run, self.seal, self.settings, self.replica = run, seal, settings, replica
        self.forward: Forward | None = None  # to the replica holding a round (None: one process)
        self._rounds: dict[str, Round] = {}

    @classmethod
    def of(cls, config: Config, exchange: Exchange, seal: StateSeal, *, replica: str) -> Rounds:
        """The rounds of `exchange`'s 2026 clients, under `config.mrtr`. A round's call runs on the
        dispatcher in force when it starts (a reload swaps the exchange's)."""
        settings = RoundSettings(round_seconds=config.mrtr.round_seconds, max_rounds=config.mrtr.max_rounds,
                                 server_info=exchange.dispatcher.stateless.server_info,
                                 take_slot=exchange.take_slot, release_slot=exchange.release_slot)
        return cls(lambda message, ctx: exchange.dispatcher.handle(message, ctx), seal, settings, replica=replica)

    async def handle(self, message: Message, ctx: RequestContext, stream: ClientChannel) -> JsonObject:
        """The reply: the call's result, an InputRequiredResult, or a refused state or answer (-32602)."""
        assert message.id is not None and message.method is not None
        params: JsonObject = message.params  # type: ignore[assignment]  # a 2026 request has its envelope in it
        binding = Binding.of((ctx.principal.tenant, ctx.principal.subject), message.method, params)
        waiting = Waiting.of(message, stream, ctx)
        try:
            state = params.get("requestState")
            if state is None:
                return await self._start(message, binding, waiting)
            ref = self.seal.open(state, binding)
            responses = _responses(params.get("inputResponses"))
            if isinstance(ref, Passed):
                return await self._pass(message, ref, waiting)
            if ref.replica == self.replica:
                return await self.resume(ref, responses, waiting)
            if self.forward is None:
                raise InvalidState("sealed by another replica, and there is no store to reach it")
            return await self.forward(ref, responses, waiting)
        except InvalidParams as exc:
            if isinstance(exc, InvalidState):
                log.info("request_state_refused", reason=exc.reason, request_id=ctx.request_id)
            ctx.outcome = "invalid_params"
            return jsonrpc.error_response(message.id, exc)

    def holds(self, ref: RoundRef) -> bool:
        return ref.round_id in self._rounds

    async def resume(self, ref: RoundRef, responses: dict[str, JsonObject], waiting: Waiting) -> JsonObject:
        """A verified retry: its answers to the questions still open, then whatever comes next."""
        round_ = self._rounds.get(ref.round_id)
        if round_ is None or round_.step != ref.step or round_.attached is not None:
            raise InvalidState("no such round here: ended, abandoned, replayed, or being resumed")
        if round_.timer is not None:
            round_.timer.cancel()
        for key, response in responses.items():  # unknown keys and ones answered already are ignored (spec)
            entry = round_.asks.get(key)
            if entry is not None and not entry[1].done():
                entry[1].set_result({"result": response})
        return await self._wait(round_, waiting)

    async def close(self) -> None:
        """Shutdown: every held call is cancelled at its backend."""
        tasks = [round_.task for round_ in self._rounds.values() if round_.task is not None]
        for round_ in list(self._rounds.values()):
            self._drop(round_, "the gateway is stopping")
        await asyncio.gather(*tasks, return_exceptions=True)

    def __len__(self) -> int:
        return len(self._rounds)

    # ---------------------------------------------------------------- one round

    async def _start(self, message: Message, binding: Binding, waiting: Waiting) -> JsonObject:
        ctx = waiting.ctx
        assert ctx is not None
        self.settings.take_slot(ctx.tenant)  # LimitReached (429) before anything is sent
        round_ = Round(secrets.token_urlsafe(16), replace(ctx, extra={}), binding)  # the call's own context
        round_.ctx.channel = RoundChannel(round_)
        self._rounds[round_.id] = round_
        round_.task = asyncio.create_task(self.run(message, round_.ctx), name=f"round:{message.method}")
        round_.task.add_done_callback(lambda _: round_.changed.set())
        return await self._wait(round_, waiting)

    async def _pass(self, message: Message, passed: Passed, waiting: Waiting) -> JsonObject:
        """A retry carrying a 2026 backend's own state: nothing is held, so it is that backend's call again,
        now, with the client's answers and the backend's state (dispatch/forward.py)."""
        ctx = waiting.ctx
        assert ctx is not None
        self.settings.take_slot(ctx.tenant)
        try:
            ctx.channel, ctx.passed = waiting.stream, passed
            reply = await self.run(message, ctx)
        finally:
            self.settings.release_slot(ctx.tenant)
        return reply or jsonrpc.error_response(waiting.request_id, InternalError("Internal error"))

    async def _wait(self, round_: Round, waiting: Waiting) -> JsonObject:
        """Until the call ends (its reply) or its backend asks something (the next InputRequiredResult)."""
        round_.attached = waiting
        held, round_.held_progress = round_.held_progress, None
        assert round_.task is not None
        traced = _round_span(round_, waiting)
        try:
            if held is not None:  # what the call reported while parked: this request hears where it stands
                assert isinstance(round_.ctx.channel, RoundChannel)
                await round_.ctx.channel.send(held)
            while True:
                round_.changed.clear()
                if round_.task.done():
                    return self._finished(round_, waiting)
                if round_.open_asks():
                    await asyncio.sleep(BATCH_SECONDS)
                    if round_.open_asks() and not round_.task.done():
                        if round_.step < self.settings.max_rounds:
                            return self._parked(round_, waiting)
                        _refuse(round_, f"the call took its {self.settings.max_rounds} rounds")
                    continue
                await round_.changed.wait()
        except asyncio.CancelledError:  # 2026: a client closing the stream cancels its request
            self._drop(round_, "the client closed the stream")
            raise
        finally:
            round_.attached = None
            if traced is not None:
                traced.note("mcpgw.round.step", round_.step)
                traced.note("mcpgw.outcome", round_.ctx.outcome if round_.task.done() else "input_required")
                traced.end()

    def _parked(self, round_: Round, waiting: Waiting) -> JsonObject:
        round_.step += 1
        state = self.seal.seal(RoundRef(round_.id, round_.step, self.replica), round_.binding)
        round_.timer = asyncio.get_running_loop().call_later(self.settings.round_seconds, self._drop, round_,
                                                             "no retry came in time")
        _report(waiting.ctx, round_.ctx, "input_required")
        result = {"resultType": "input_required", "inputRequests": round_.open_asks(), "requestState": state,
                  "_meta": {spec.SERVER_INFO_KEY: self.settings.server_info}}
        return {"jsonrpc": "2.0", "id": waiting.request_id, "result": result}

    def _finished(self, round_: Round, waiting: Waiting) -> JsonObject:
        self._end(round_)
        assert round_.task is not None
        reply = round_.task.result() or jsonrpc.error_response(waiting.request_id, InternalError("Internal error"))
        _report(waiting.ctx, round_.ctx, round_.ctx.outcome)
        result = reply.get("result")
        if round_.step and isinstance(result, dict) and "ttlMs" in result:
            result["ttlMs"] = 0  # a retry's result is never to be cached (spec: MRTR)
        return {**reply, "id": waiting.request_id}

    def _drop(self, round_: Round, why: str) -> None:
        """End a round before its call did: the call is cancelled, so the backend is told."""
        if self._rounds.get(round_.id) is not round_:
            return
        self._end(round_)
        log.info("input_round_dropped", why=why, step=round_.step, method=round_.binding.method,
                 tool=round_.ctx.tool, backend=round_.ctx.backend, request_id=round_.ctx.request_id)
        if round_.task is not None:
            round_.task.cancel()

    def _end(self, round_: Round) -> None:
        if self._rounds.pop(round_.id, None) is None:
            return
        if round_.timer is not None:
            round_.timer.cancel()
        self.settings.release_slot(round_.ctx.tenant)


def _round_span(round_: Round, waiting: Waiting) -> Any:
    """The span of one request's part in a round (tracing on, sampled): under that request's span, linked
    to the span of the request that started the held call (the backend call's own parent)."""
    span: Any = waiting.ctx.span if waiting.ctx is not None else None
    if span is None or not span.recording:
        return None
    held: Any = round_.ctx.span
    links = (held,) if held is not None and held is not span and held.recording else ()
    return span.tracing.internal("mcpgw round", parent=span, links=links)


def input_request(method: str, params: JsonObject | None) -> JsonObject:
    """A backend's request as a 2026 input request: method and params, no id, without what 2026 removed."""
    request: JsonObject = {"method": method}
    if params:
        params = {key: value for key, value in params.items() if key not in LEGACY_ONLY}
        meta = params.get("_meta")
        if isinstance(meta, dict) and RELATED_TASK in meta:
            params["_meta"] = {key: value for key, value in meta.items() if key != RELATED_TASK}
        request["params"] = params
    return request


def _responses(value: Any) -> dict[str, JsonObject]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(response, dict) for response in value.values()):
        raise InvalidParams("Invalid params: inputResponses must map each key to a result object")
    return value


def _refuse(round_: Round, why: str) -> None:
    """The backend's open questions get an error (relay.py answers it); the call goes on without them."""
    for _, answer in round_.asks.values():
        if not answer.done():
            answer.set_exception(ChannelClosed(why))


def _report(ctx: RequestContext | None, call: RequestContext, outcome: str) -> None:
    """What the request's log line says: the call's tool, backend and questions, and how this request ended."""
    if ctx is not None:
        ctx.tool, ctx.backend, ctx.outcome = call.tool, call.backend, outcome
        ctx.extra.update(call.extra)
