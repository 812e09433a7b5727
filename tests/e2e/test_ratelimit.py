"""Per-tenant rate limits: the pure GCRA step, the gateway over HTTP, and Redis for real.

Redis tests use the server at 127.0.0.1:6379 with a unique key prefix each, deleted after.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from backend_fixtures import free_port
from conftest import MCP_HEADERS, RawClient, StartGateway, make_config, make_token
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.config import RateLimitConfig
from gateway.ratelimit import MemoryRateLimiter, RedisRateLimiter, gcra, retry_after_header

pytestmark = pytest.mark.timeout(60)

REDIS_URL = "redis://127.0.0.1:6379/0"


# ---------------------------------------------------------------- the pure GCRA step


def test_a_full_burst_passes_at_once_and_the_next_request_waits_one_interval() -> None:
    limit = RateLimitConfig(requests_per_second=10, burst=3)
    tat, now = 0.0, 1000.0
    for _ in range(3):
        allowed, retry_after, tat = gcra(tat, now, limit)
        assert allowed and retry_after == 0.0
    allowed, retry_after, new_tat = gcra(tat, now, limit)
    assert not allowed
    assert retry_after == pytest.approx(0.1)
    assert new_tat == tat  # a refusal spends nothing
    assert gcra(tat, now + retry_after, limit)[0]  # and is allowed exactly when told


def test_a_long_idle_period_does_not_bank_more_than_one_burst() -> None:
    limit = RateLimitConfig(requests_per_second=5, burst=2)
    tat = 0.0
    for now in (10_000.0, 10_000.0):
        allowed, _, tat = gcra(tat, now, limit)
        assert allowed
    assert not gcra(tat, 10_000.0, limit)[0]


def test_requests_at_exactly_the_rate_are_always_allowed() -> None:
    limit = RateLimitConfig(requests_per_second=4, burst=1)
    tat = 0.0
    for i in range(100):
        allowed, _, tat = gcra(tat, 50.0 + i * 0.25, limit)
        assert allowed


@settings(max_examples=200, deadline=None)
@given(rate=st.floats(0.5, 200), burst=st.integers(1, 20),
       gaps=st.lists(st.floats(0, 0.5), min_size=1, max_size=300))
def test_no_window_ever_admits_more_than_rate_times_window_plus_burst(rate: float, burst: int,
                                                                    gaps: list[float]) -> None:
    limit = RateLimitConfig(requests_per_second=rate, burst=burst)
    tat, now, admitted = 0.0, 100.0, []
    for gap in gaps:
        now += gap
        allowed, _, tat = gcra(tat, now, limit)
        if allowed:
            admitted.append(now)
    for i, start in enumerate(admitted):
        for j in range(i, len(admitted)):
            assert j - i + 1 <= burst + rate * (admitted[j] - start) + 1e-6


@pytest.mark.parametrize(("seconds", "header"), [(0.0, "1"), (0.001, "1"), (1.0, "1"), (1.01, "2"), (59.5, "60")])
def test_retry_after_is_whole_seconds_and_never_zero(seconds: float, header: str) -> None:
    assert retry_after_header(seconds) == header


async def test_tenants_have_separate_budgets_in_memory() -> None:
    now = [0.0]
    limiter = MemoryRateLimiter(clock=lambda: now[0])
    limit = RateLimitConfig(requests_per_second=1, burst=1)
    assert (await limiter.check("alpha", limit))[0]
    assert not (await limiter.check("alpha", limit))[0]
    assert (await limiter.check("beta", limit))[0]
    now[0] = 1.0
    assert (await limiter.check("alpha", limit))[0]


# ---------------------------------------------------------------- through the gateway


def limited_config(rate: float, burst: int) -> Any:
    limit = {"requests_per_second": rate, "burst": burst}
    return make_config([], tenants={"acme": {"backends": ["*"], "rate_limit": limit}, "free": {"backends": ["*"]}})


async def test_accepted_requests_over_a_window_stay_within_one_burst_of_the_budget(
        gateway: StartGateway, raw_client: Any) -> None:
    # A burst of half a second's budget: the gateway stalling for up to that long on a loaded machine
    # (CI) loses no tokens, so the count stays within one burst of the budget however the machine is.
    rate, burst, window = 20.0, 10, 1.5
    running = await gateway(limited_config(rate, burst))
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    await asyncio.sleep(burst / rate + 0.1)  # let the burst refill after the handshake
    statuses: list[int] = []
    started = time.monotonic()

    async def push() -> None:  # several at once: the budget is pressed on even while one waits
        while time.monotonic() - started < window:
            statuses.append((await client.post(client.request("ping")))[0])

    await asyncio.gather(*(push() for _ in range(4)))
    elapsed = time.monotonic() - started
    assert set(statuses) <= {200, 429}
    accepted, refused = statuses.count(200), statuses.count(429)
    expected = rate * elapsed + burst
    assert abs(accepted - expected) <= burst, (accepted, expected)
    assert refused > accepted  # the client really did push past the limit


async def test_a_refusal_is_429_with_an_integer_retry_after(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(limited_config(0.5, 1))  # one request, then one every two seconds
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()  # spends the burst; the initialized notification is refused
    status, body, headers = await client.post(client.request("ping"))
    assert status == 429
    assert headers["Retry-After"].isdigit() and 1 <= int(headers["Retry-After"]) <= 2
    assert body["error"]["message"] == "Too Many Requests"
    assert "WWW-Authenticate" not in headers


async def test_the_budget_is_per_tenant_and_shared_by_its_subjects(gateway: StartGateway) -> None:
    running = await gateway(limited_config(0.5, 2))
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'

    async def status_for(token: str) -> int:  # no session: the limit is checked before it
        headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
        async with aiohttp.ClientSession() as http, http.post(running.url, data=ping, headers=headers) as resp:
            return resp.status

    assert await status_for(make_token("acme", sub="one")) == 400
    assert await status_for(make_token("acme", sub="two")) == 400
    assert await status_for(make_token("acme", sub="three")) == 429  # same tenant, same budget
    assert await status_for(make_token("free")) == 400  # another tenant, no limit
    for _ in range(5):  # refused logins spend nothing of acme's budget
        assert await status_for("garbage") == 401


# ---------------------------------------------------------------- Redis


@pytest.fixture
async def redis_prefix() -> AsyncIterator[str]:
    """A key prefix for one test; every key under it is deleted afterwards."""
    prefix = f"mcpgw-test-{uuid.uuid4().hex}:"
    yield prefix
    client = aioredis.Redis.from_url(REDIS_URL)
    async for key in client.scan_iter(match=f"{prefix}*"):
        await client.delete(key)
    await client.aclose()


@pytest.fixture
async def redis_client() -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(REDIS_URL)
    yield client
    await client.aclose()


async def test_redis_allows_a_burst_then_refuses_with_retry_after(redis_client: aioredis.Redis,
                                                                  redis_prefix: str) -> None:
    limiter = RedisRateLimiter(redis_client, key_prefix=redis_prefix)
    limit = RateLimitConfig(requests_per_second=2, burst=3)
    decisions = [await limiter.check("acme", limit) for _ in range(4)]
    assert [allowed for allowed, _ in decisions] == [True, True, True, False]
    assert 0.4 < decisions[3][1] <= 0.5
    assert not limiter.degraded
    ttl = await redis_client.pttl(f"{redis_prefix}ratelimit:acme")
    assert 0 < ttl <= 1500 + 1000 + 1  # the key lives as long as its TAT matters, plus a second


async def test_two_replicas_share_one_budget_in_redis(redis_prefix: str) -> None:
    first, second = aioredis.Redis.from_url(REDIS_URL), aioredis.Redis.from_url(REDIS_URL)
    try:
        replicas = [RedisRateLimiter(first, key_prefix=redis_prefix),
                    RedisRateLimiter(second, key_prefix=redis_prefix)]
        limit = RateLimitConfig(requests_per_second=0.1, burst=4)
        allowed = [(await replicas[i % 2].check("acme", limit))[0] for i in range(8)]
        assert allowed == [True] * 4 + [False] * 4
        assert (await replicas[1].check("other", limit))[0]  # tenants have their own keys
    finally:
        await first.aclose()
        await second.aclose()


async def test_an_unreachable_redis_falls_back_to_memory_counters(redis_prefix: str) -> None:
    dead = aioredis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=1)
    try:
        limiter = RedisRateLimiter(dead, key_prefix=redis_prefix)
        limit = RateLimitConfig(requests_per_second=0.1, burst=2)
        started = time.monotonic()
        allowed = [(await limiter.check("acme", limit))[0] for _ in range(3)]
        assert allowed == [True, True, False]  # still limited, by this process alone
        assert limiter.degraded
        assert time.monotonic() - started < 2  # a dead Redis does not slow every request down
    finally:
        await dead.aclose()


async def test_a_redis_that_never_answers_falls_back_within_the_timeout(redis_prefix: str) -> None:
    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while await reader.read(65536):
                pass  # accepts the command, never replies
        writer.close()

    port = free_port()
    server = await asyncio.start_server(swallow, "127.0.0.1", port)
    client = aioredis.Redis.from_url(f"redis://127.0.0.1:{port}/0")
    try:
        limiter = RedisRateLimiter(client, key_prefix=redis_prefix, timeout_seconds=0.2)
        started = time.monotonic()
        assert (await limiter.check("acme", RateLimitConfig(requests_per_second=1, burst=1)))[0]
        assert limiter.degraded and time.monotonic() - started < 1.5
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()


class TcpProxy:
    """A TCP forwarder to Redis that the test can cut and restore, as an outage would."""

    def __init__(self, target_port: int = 6379) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        self._writers.clear()
        await self._server.wait_closed()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._writers += [writer, upstream_writer]
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer), return_exceptions=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()


async def test_redis_going_away_and_coming_back(redis_prefix: str) -> None:
    proxy = TcpProxy()
    await proxy.start()
    client = aioredis.Redis.from_url(f"redis://127.0.0.1:{proxy.port}/0", socket_connect_timeout=1)
    now = [0.0]
    limiter = RedisRateLimiter(client, key_prefix=redis_prefix, clock=lambda: now[0], retry_seconds=5)
    limit = RateLimitConfig(requests_per_second=1000, burst=1000)
    key = f"{redis_prefix}ratelimit:acme"
    try:
        assert (await limiter.check("acme", limit))[0] and not limiter.degraded
        await proxy.stop()
        assert (await limiter.check("acme", limit))[0]  # served from memory
        assert limiter.degraded
        await proxy.start()
        tat = await client.get(key)
        assert (await limiter.check("acme", limit))[0]
        assert limiter.degraded and await client.get(key) == tat  # not retried before retry_seconds
        now[0] = 5.0
        assert (await limiter.check("acme", limit))[0]
        assert not limiter.degraded and await client.get(key) != tat  # back on the shared counter
    finally:
        await client.aclose()
        await proxy.stop()
