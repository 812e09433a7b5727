"""gateway.upstream.routed: RoutedUpstream's breaker, limits, deadline and retries around a fake upstream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from gateway.upstream.base import JsonObject, NotificationHandler, UpstreamError
from gateway.upstream.breaker import CircuitPolicy
from gateway.upstream.policy import RoutePolicy
from gateway.upstream.routed import RoutedUpstream

pytestmark = pytest.mark.timeout(60)

Behaviour = Callable[[str, float, NotificationHandler | None], Awaitable[JsonObject]]
OK_REPLY: JsonObject = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}


# ---------------------------------------------------------------- RoutedUpstream


class FakeUpstream:
    """Runs `behaviour` for each request; counts requests and cancellations."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.name = "fake"
        self.behaviour = behaviour
        self.methods: list[str] = []
        self.cancelled = 0

    async def request(self, method: str, params: JsonObject | None, *, timeout: float,  # noqa: ASYNC109
                      session_key: str = "", headers: Any = None,
                      on_notification: NotificationHandler | None = None, **_: Any) -> JsonObject:
        self.methods.append(method)
        try:
            return await self.behaviour(method, timeout, on_notification)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    async def start(self) -> None: ...
    async def notify(self, method: str, params: JsonObject | None, *, session_key: str = "", **_: Any) -> None: ...
    server_capabilities: JsonObject = {}

    def on_list_changed(self, callback: Any) -> None: ...
    async def close(self) -> None: ...


def routed(behaviour: Behaviour, clock: Callable[[], float] = time.monotonic, **policy: Any) -> RoutedUpstream:
    circuit = CircuitPolicy(**policy.pop("circuit", {"failures": 3, "cooldown_seconds": 10.0}))
    return RoutedUpstream(FakeUpstream(behaviour), RoutePolicy(circuit=circuit, **policy), clock=clock,
                          rand=lambda: 0.0)


def inner(upstream: RoutedUpstream) -> FakeUpstream:
    assert isinstance(upstream.inner, FakeUpstream)
    return upstream.inner


def failing(reason: str, *, sent: bool = True) -> Behaviour:
    async def behaviour(method: str, timeout: float, handler: Any) -> JsonObject:  # noqa: ASYNC109
        raise UpstreamError(reason, "scripted", sent=sent)
    return behaviour


async def ok(method: str, timeout: float, handler: Any) -> JsonObject:  # noqa: ASYNC109
    return OK_REPLY


async def hang(method: str, timeout: float, handler: Any) -> JsonObject:  # noqa: ASYNC109
    await asyncio.sleep(3600)
    raise AssertionError("unreachable")


async def test_a_tools_call_that_may_have_arrived_is_sent_exactly_once() -> None:
    upstream = routed(failing("unavailable", sent=True))
    with pytest.raises(UpstreamError):
        await upstream.request("tools/call", {}, timeout=5)
    assert inner(upstream).methods == ["tools/call"]


async def test_a_refused_tools_call_is_retried_until_it_gets_through() -> None:
    attempts: list[int] = []

    async def refused_twice(method: str, timeout: float, handler: Any) -> JsonObject:  # noqa: ASYNC109
        attempts.append(1)
        if len(attempts) < 3:
            raise UpstreamError("unavailable", "refused", sent=False)
        return OK_REPLY

    upstream = routed(refused_twice)
    assert await upstream.request("tools/call", {}, timeout=5) == OK_REPLY
    assert len(attempts) == 3


async def test_a_failing_tools_list_is_retried_but_not_forever() -> None:
    upstream = routed(failing("bad_response"), retries=2)
    with pytest.raises(UpstreamError, match="scripted"):
        await upstream.request("tools/list", None, timeout=5)
    assert inner(upstream).methods == ["tools/list"] * 3


async def test_calls_over_the_limit_queue_and_over_the_queue_fail_at_once() -> None:
    release = asyncio.Event()

    async def held(method: str, timeout: float, handler: Any) -> JsonObject:  # noqa: ASYNC109
        await release.wait()
        return OK_REPLY

    upstream = routed(held, max_concurrency=2, max_queue=1)
    running = [asyncio.create_task(upstream.request("tools/call", {}, timeout=5)) for _ in range(3)]
    await asyncio.sleep(0.05)
    assert len(inner(upstream).methods) == 2  # the third waits in the queue
    started = time.monotonic()
    with pytest.raises(UpstreamError) as refused:
        await upstream.request("tools/call", {}, timeout=5)
    assert refused.value.reason == "overloaded" and time.monotonic() - started < 0.5
    release.set()
    assert await asyncio.gather(*running) == [OK_REPLY] * 3
    assert upstream.circuit_state == "closed"  # overload is ours, not the backend's


async def test_a_call_that_times_out_while_queued_does_not_count_against_the_backend() -> None:
    upstream = routed(hang, max_concurrency=1, max_queue=5, circuit={"failures": 1, "cooldown_seconds": 10.0})
    holder = asyncio.create_task(upstream.request("tools/call", {}, timeout=30))
    await asyncio.sleep(0.02)
    with pytest.raises(UpstreamError) as queued:
        await upstream.request("tools/call", {}, timeout=0.1)
    assert queued.value.reason == "timeout"
    assert upstream.circuit_state == "closed"
    holder.cancel()
    await asyncio.gather(holder, return_exceptions=True)


async def test_progress_keeps_a_long_call_alive_past_its_timeout() -> None:
    async def reports_progress(method: str, timeout: float, handler: Any) -> JsonObject:  # noqa: ASYNC109
        for step in range(8):
            await asyncio.sleep(0.1)
            await handler({"method": "notifications/progress", "params": {"progress": step}})
        return OK_REPLY

    upstream = routed(reports_progress)
    seen: list[JsonObject] = []

    async def client(message: JsonObject) -> None:
        seen.append(message)

    assert await upstream.request("tools/call", {}, timeout=0.3, on_notification=client) == OK_REPLY
    assert len(seen) == 8  # still relayed to the caller


async def test_without_progress_the_same_call_times_out_and_is_cancelled_upstream() -> None:
    upstream = routed(hang)
    started = time.monotonic()
    with pytest.raises(UpstreamError) as timed_out:
        await upstream.request("tools/call", {}, timeout=0.3)
    assert timed_out.value.reason == "timeout"
    assert 0.25 <= time.monotonic() - started < 3.0
    assert inner(upstream).cancelled == 1  # the upstream sends notifications/cancelled on this


async def test_the_hard_cap_ends_a_call_however_much_progress_it_reports() -> None:
    async def endless_progress(method: str, timeout: float, handler: Any) -> JsonObject:  # noqa: ASYNC109
        while True:
            await asyncio.sleep(0.05)
            await handler({"method": "notifications/progress", "params": {}})

    upstream = routed(endless_progress, max_call_seconds=0.6)
    started = time.monotonic()
    with pytest.raises(UpstreamError) as capped:
        await upstream.request("tools/call", {}, timeout=0.2)
    assert capped.value.reason == "timeout"
    assert 0.55 <= time.monotonic() - started < 3.0


async def test_a_cancelled_caller_cancels_the_upstream_call_and_frees_its_slot() -> None:
    upstream = routed(hang, max_concurrency=1, max_queue=0, circuit={"failures": 1, "cooldown_seconds": 10.0})
    task = asyncio.create_task(upstream.request("tools/call", {}, timeout=30))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert inner(upstream).cancelled == 1
    assert upstream.circuit_state == "closed"  # the client went away: not the backend's fault
    inner(upstream).behaviour = ok
    assert await upstream.request("tools/call", {}, timeout=1) == OK_REPLY  # the slot is free again


async def test_an_open_circuit_fails_fast_without_touching_the_backend_then_probes() -> None:
    now = [0.0]
    changes: list[tuple[str, str]] = []
    upstream = routed(failing("timeout"), clock=lambda: now[0])
    upstream._on_circuit_change = lambda backend, state: changes.append((backend, state))
    for _ in range(3):
        with pytest.raises(UpstreamError):
            await upstream.request("tools/call", {}, timeout=1)
    assert upstream.circuit_state == "open"
    with pytest.raises(UpstreamError) as refused:
        await upstream.request("tools/call", {}, timeout=1)
    assert refused.value.reason == "circuit_open"
    assert len(inner(upstream).methods) == 3
    now[0] = 10.0
    assert upstream.circuit_state == "half_open"
    inner(upstream).behaviour = ok
    assert await upstream.request("tools/call", {}, timeout=1) == OK_REPLY
    assert upstream.circuit_state == "closed"
    assert changes == [("fake", "open"), ("fake", "half_open"), ("fake", "closed")]


async def test_tool_errors_and_backend_json_rpc_errors_keep_the_circuit_closed() -> None:
    async def refuses(method: str, timeout: float, handler: Any) -> JsonObject:  # noqa: ASYNC109
        return {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "no"}}

    upstream = routed(refuses)
    for _ in range(10):
        await upstream.request("tools/call", {}, timeout=1)
    assert upstream.circuit_state == "closed"
