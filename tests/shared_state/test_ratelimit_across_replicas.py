"""Rate limits in Redis: a tenant's budget holds across replicas (R requests per second, not N x R)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import structlog
from conftest import RawClient, make_token, stdio_backend

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
    for _ in range(3):  # a window in which Redis counted as down (a stalled loop) proves nothing: again
        await asyncio.sleep(burst / rate + 0.2)  # the handshake's (or the last window's) requests are paid back
        with structlog.testing.capture_logs() as logs:
            accepted, budget = await _window(clients, window, rate, burst)
        if not any(entry["event"] == "store_unavailable" for entry in logs):
            break
    total = accepted["a"] + accepted["b"]
    assert abs(total - budget) <= burst + 2, (accepted, budget)
    assert min(accepted.values()) > 0  # both replicas took their share of the one budget


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
