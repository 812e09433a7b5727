"""Per-tenant rate limits with GCRA: in memory, or in Redis so replicas share one budget.

GCRA keeps one number per tenant, the theoretical arrival time (TAT). A request is allowed
when, after adding one emission interval T = 1/rate, the TAT is at most `burst * T` ahead of now.
A batch of n messages costs n intervals at once (`cost`), so batching buys no extra rate.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any, Protocol

import structlog

from gateway.config import RateLimitConfig

log = structlog.get_logger("gateway.ratelimit")

Decision = tuple[bool, float]  # (allowed, retry_after_seconds)


def gcra(tat: float, now: float, limit: RateLimitConfig, cost: int = 1) -> tuple[bool, float, float]:
    """Pure GCRA step for `cost` requests at once: (allowed, retry_after, new_tat)."""
    interval = 1.0 / limit.requests_per_second
    new_tat = max(tat, now) + cost * interval
    ahead = new_tat - now - limit.burst * interval
    if ahead > 1e-9:
        return False, ahead, tat
    return True, 0.0, new_tat


class RateLimiter(Protocol):
    async def check(self, tenant: str, limit: RateLimitConfig, cost: int = 1) -> Decision: ...


class MemoryRateLimiter:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._tat: dict[str, float] = {}

    async def check(self, tenant: str, limit: RateLimitConfig, cost: int = 1) -> Decision:
        return self.check_now(tenant, limit, cost)

    def check_now(self, tenant: str, limit: RateLimitConfig, cost: int = 1) -> Decision:
        allowed, retry_after, self._tat[tenant] = gcra(self._tat.get(tenant, 0.0), self.clock(), limit, cost)
        return allowed, retry_after


# Redis's own clock (TIME) keeps every replica on one timeline.
GCRA_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3] or '1')
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local new_tat = tat + cost * interval
local ahead = new_tat - now - burst * interval
if ahead > 0.000000001 then
  return {0, tostring(ahead)}
end
redis.call('SET', KEYS[1], tostring(new_tat), 'PX', math.ceil((new_tat - now) * 1000) + 1000)
return {1, '0'}
"""


REDIS_RETRY_SECONDS = 1.0
"""While Redis is down, ask it again at most this often; in between, memory answers at once."""

REDIS_TIMEOUT_SECONDS = 0.5
"""A Redis that does not answer in time counts as down (a black-holed host would hang requests)."""


class RedisRateLimiter:
    """Shared counters in Redis; if Redis fails, this process's own counters take over."""

    def __init__(self, redis: Any, *, key_prefix: str, fallback: MemoryRateLimiter | None = None,
                 clock: Callable[[], float] = time.monotonic, retry_seconds: float = REDIS_RETRY_SECONDS,
                 timeout_seconds: float = REDIS_TIMEOUT_SECONDS,
                 on_failure: Callable[[Exception], None] | None = None) -> None:
        self.redis = redis
        self.key_prefix = key_prefix
        self.fallback = fallback or MemoryRateLimiter()
        self.clock = clock
        self.retry_seconds = retry_seconds
        self.timeout_seconds = timeout_seconds
        # Given (gateway.store wires the shared StoreHealth), failures are reported there and the
        # store logs the outage once for every part; otherwise this limiter logs its own.
        self.on_failure = on_failure
        self._script = redis.register_script(GCRA_SCRIPT)
        self.degraded = False
        self._retry_at = 0.0

    async def check(self, tenant: str, limit: RateLimitConfig, cost: int = 1) -> Decision:
        if self.degraded and self.clock() < self._retry_at:
            return self.fallback.check_now(tenant, limit, cost)
        key = f"{self.key_prefix}ratelimit:{tenant}"
        try:
            async with asyncio.timeout(self.timeout_seconds):
                allowed, ahead = await self._script(keys=[key],
                                                    args=[1.0 / limit.requests_per_second, limit.burst, cost])
        except Exception as exc:  # any Redis trouble: never fail a request because of it
            self._degrade(exc)
            return self.fallback.check_now(tenant, limit, cost)
        if self.degraded:
            if self.on_failure is None:
                log.info("ratelimit_redis_recovered")
            self.degraded = False
        return bool(int(allowed)), float(ahead)

    def _degrade(self, exc: Exception) -> None:
        if self.on_failure is not None:
            self.on_failure(exc)
        elif not self.degraded:
            log.warning("ratelimit_redis_unavailable", error=type(exc).__name__)
        self.degraded = True
        self._retry_at = self.clock() + self.retry_seconds


def retry_after_header(seconds: float) -> str:
    """Retry-After takes whole seconds; never 0, so clients do back off."""
    return str(max(1, math.ceil(seconds)))
