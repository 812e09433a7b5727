"""Rate limits in Redis: a tenant's budget holds across replicas (R requests per second, not N x R)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
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
    await asyncio.sleep(burst / rate + 0.2)  # the handshake's requests are paid back
    accepted = {"a": 0, "b": 0}

    async def hammer(name: str, client: RawClient, until: float) -> None:
        while time.monotonic() < until:
            status, _, _ = await client.post(client.request("ping"))
            assert status in (200, 429)
            accepted[name] += status == 200

    started = time.monotonic()
    await asyncio.gather(hammer("a", clients[0], started + window), hammer("b", clients[1], started + window))
    elapsed = time.monotonic() - started
    total = accepted["a"] + accepted["b"]
    budget = rate * elapsed + burst
    assert abs(total - budget) <= burst + 2, (accepted, budget)
    assert min(accepted.values()) > 0  # both replicas took their share of the one budget
