"""State gauges are pushed by their owners: the session store's count, readiness's verdict."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import RawClient, StartGateway, make_config, make_token, stdio_backend

from gateway.health import Readiness
from gateway.tenancy import Principal
from gateway.transport.sessions import MemorySessionStore
from observability.helpers import registry_of, value

pytestmark = pytest.mark.timeout(60)

ALICE = Principal("acme", "alice")


async def test_the_session_store_reports_its_count_on_create_delete_and_expiry() -> None:
    now = [1000.0]
    counts: list[int] = []
    store = MemorySessionStore(idle_seconds=60, clock=lambda: now[0], on_count=counts.append)
    first = await store.create(ALICE, "2025-11-25")
    await store.create(ALICE, "2025-11-25")
    await store.delete(first.id)
    now[0] += 61
    assert store.sessions() == []  # both idle too long: dropped
    assert counts == [1, 2, 1, 0]


async def test_readiness_reports_each_verdict_without_being_asked_by_a_probe() -> None:
    verdicts: list[bool] = []
    built = asyncio.Event()
    readiness = Readiness(on_verdict=verdicts.append)
    readiness.gate("catalogue not built yet", built)
    watcher = asyncio.create_task(readiness.watch(seconds=30))
    try:
        await asyncio.sleep(0.01)
        assert verdicts == [False]
        built.set()  # the gate opens: reported at once, not WATCH_SECONDS later
        await asyncio.sleep(0.01)
        assert verdicts == [False, True]
        readiness.start_draining()
        assert verdicts == [False, True, False]
        assert await readiness.reasons() == ["draining"]
    finally:
        watcher.cancel()


async def test_the_watch_stops_when_it_is_cancelled_in_the_turn_its_gate_opens() -> None:
    """A SIGTERM during start-up: the first build (from the shared store) opened the gate as shutdown
    cancelled the watch. asyncio.wait_for on 3.11 returned the gate's result then, swallowing the
    cancel, and the worker hung in its cleanup until SIGKILLed."""
    built = asyncio.Event()
    readiness = Readiness()
    readiness.gate("catalogue not built yet", built)
    watcher = asyncio.create_task(readiness.watch(seconds=30))
    await asyncio.sleep(0.01)  # waiting for the gate
    built.set()
    watcher.cancel()
    done, _ = await asyncio.wait({watcher}, timeout=5)
    assert watcher in done and watcher.cancelled()


async def test_the_gauges_follow_sessions_and_readiness_of_a_running_gateway(
    gateway: StartGateway, raw_client: Any
) -> None:
    running = await gateway(make_config([stdio_backend("calc")]))
    reg = registry_of(running.app)
    await asyncio.sleep(0.05)  # the watcher reports the open gate on its next turn
    assert value(reg, "mcpgw_ready") == 1
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    assert value(reg, "mcpgw_sessions_active") == 1
    async with client.session.delete(running.url, headers=client.headers()) as response:
        assert response.status in (200, 204)
    assert value(reg, "mcpgw_sessions_active") == 0
