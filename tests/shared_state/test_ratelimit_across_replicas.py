"""Rate limits in Redis: a tenant's budget holds across replicas (R requests per second, not N x R)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from conftest import RawClient, make_token, stdio_backend

from gateway import keys
from gateway.ratelimit import MemoryRateLimiter
from gateway.shared_state import SharedRateLimiter
from shared_state.conftest import StartReplicas, needs_shared_redis

pytestmark = [pytest.mark.timeout(60), needs_shared_redis]


async def test_a_tenant_spread_over_two_replicas_gets_its_rate_not_twice_it(
        replicas: StartReplicas, raw_client: Any) -> None:
    rate, burst, window = 20.0, 4, 2.0
    limit = {"requests_per_second": rate, "burst": burst}
    a, b = await replicas(2, [stdio_backend("calc")], tenants={"acme": {"backends": ["*"], "rate_limit": limit}})
    token = make_token("acme")
    leader: RawClient = raw_client(a.url, token)
    await leader.initialize()
    clients = [leader, raw_client(b.url, token)]
    clients[1].session_id = leader.session_id
    local = [_count_local_decisions(r.app) for r in (a, b)]
    for _ in range(3):  # a window in which a replica counted locally (Redis slow: a stalled loop) proves nothing
        await asyncio.sleep(burst / rate + 0.2)  # the handshake's (or the last window's) requests are paid back
        before = [counted.used for counted in local]
        accepted, budget = await _window(clients, window, rate, burst)
        if [counted.used for counted in local] == before:
            break
    total = accepted["a"] + accepted["b"]
    assert abs(total - budget) <= burst + 2, (accepted, budget)
    assert min(accepted.values()) > 0  # both replicas took their share of the one budget


class _CountedLocal(MemoryRateLimiter):
    """A replica's own counters, which decide while Redis does not answer in time: how often they did."""

    used = 0

    def check_now(self, tenant: str, limit: Any, cost: int = 1) -> tuple[bool, float]:
        self.used += 1
        return super().check_now(tenant, limit, cost)


def _count_local_decisions(app: Any) -> _CountedLocal:
    """Its fallback counted (the store's outage log tells only its first failure, maybe outside a window)."""
    shared = app[keys.EXCHANGE].rate_limiter
    assert isinstance(shared, SharedRateLimiter)
    shared.limiter.fallback = counted = _CountedLocal()
    return counted


async def _window(clients: list[RawClient], window: float, rate: float, burst: int) -> tuple[dict[str, int], float]:
    """Both clients ping as fast as they can for `window` seconds: what each got through, and the budget."""
    accepted = {"a": 0, "b": 0}

    async def hammer(name: str, client: RawClient, until: float) -> None:
        while time.monotonic() < until:
            status, _, _ = await client.post(client.request("ping"))
            assert status in (200, 429)
            accepted[name] += status == 200

    started = time.monotonic()
    await asyncio.gather(hammer("a", clients[0], started + window), hammer("b", clients[1], started + window))
    return accepted, rate * (time.monotonic() - started) + burst
