"""Whether Redis answers: one tracker per process, shared by every Redis-backed part.

Every Redis operation goes through `StoreHealth.call`: while Redis is known to be down it
fails at once (the caller serves from local state instead of waiting on a dead socket);
an operation that fails marks it down; only the watchdog's PING marks it up again. So an
outage costs one warning and one recovery line in the log, never one per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog
from redis import exceptions as redis_errors

log = structlog.get_logger("gateway.store")

T = TypeVar("T")

OPERATION_TIMEOUT_SECONDS = 1.0
"""The most one Redis operation may take before Redis counts as down (socket timeouts are shorter)."""

PROBE_SECONDS = 0.5
"""How often the watchdog PINGs: a returning Redis is noticed within this."""

OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    redis_errors.ConnectionError, redis_errors.TimeoutError, TimeoutError, OSError,
    redis_errors.ReadOnlyError, redis_errors.MasterDownError, redis_errors.TryAgainError,
    redis_errors.ClusterError, redis_errors.RedisClusterException,
)
"""Errors that mean "Redis is not reachable or not serving" (a failover counts), not "bad command"."""


class StoreUnavailable(Exception):
    """Redis cannot answer now; the caller falls back to its local state."""


class StoreHealth:
    """Up or down, with one log line and one `on_change` call per transition.

    It starts down (unknown) until the first PING answers, so nothing waits on a Redis
    that was never there.
    """

    def __init__(self, *, name: str, on_change: Callable[[bool], None] | None = None,
                 timeout_seconds: float = OPERATION_TIMEOUT_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name  # the redacted URL, for logs
        self.on_change = on_change or (lambda up: None)
        self.timeout_seconds = timeout_seconds
        self.clock = clock
        self.up = False
        self.ever_up = False
        self._down_since = clock()
        self._start_reported = False
        self._up_event = asyncio.Event()

    async def call(self, operation: Callable[[], Awaitable[T]]) -> T:
        """Run one Redis operation, bounded in time; StoreUnavailable when Redis is (or just went) down."""
        if not self.up:
            raise StoreUnavailable("redis is down")
        try:
            async with asyncio.timeout(self.timeout_seconds):
                return await operation()
        except OUTAGE_ERRORS as exc:
            self.failed(exc)
            raise StoreUnavailable(type(exc).__name__) from exc
        except redis_errors.RedisError as exc:  # Redis answered with an error: a bug to log, not an outage
            log.error("store_command_failed", store=self.name, error=str(exc)[:200])
            raise StoreUnavailable(type(exc).__name__) from exc

    def failed(self, exc: BaseException) -> None:
        """An operation or a probe failed: down from now on (logged once per outage)."""
        if not self.up:
            self._report_start_failure(exc)
            return
        self.up, self._down_since = False, self.clock()
        self._up_event.clear()
        log.warning("store_unavailable", store=self.name, error=type(exc).__name__,
                    hint="serving from local state until Redis answers again")
        self.on_change(False)

    def recovered(self) -> None:
        if self.up:
            return
        event = "store_recovered" if self.ever_up else "store_connected"
        log.info(event, store=self.name, down_seconds=round(self.clock() - self._down_since, 3))
        self.up = self.ever_up = True
        self._up_event.set()
        self.on_change(True)

    def _report_start_failure(self, exc: BaseException) -> None:
        """Redis was not there at start: say so once; the gateway runs on local state meanwhile."""
        if self.ever_up or self._start_reported:
            return
        self._start_reported = True
        log.warning("store_unavailable", store=self.name, error=type(exc).__name__, at_start=True,
                    hint="starting on local state; shared state resumes when Redis answers")
        self.on_change(False)

    def down_seconds(self) -> float:
        """How long Redis has been down (0 while up); counted from the start if it never answered."""
        return 0.0 if self.up else self.clock() - self._down_since

    async def wait_up(self) -> None:
        await self._up_event.wait()

    async def probe(self, ping: Callable[[], Awaitable[Any]]) -> bool:
        """One PING, bounded in time; updates the state; True when Redis answered."""
        try:
            async with asyncio.timeout(self.timeout_seconds):
                await ping()
        except (redis_errors.RedisError, TimeoutError, OSError) as exc:
            self.failed(exc)
            return False
        self.recovered()
        return True

    async def watch(self, ping: Callable[[], Awaitable[Any]], interval: float = PROBE_SECONDS) -> None:
        """The watchdog (run as a task, after a first `probe`): PING forever; the only way back to up."""
        while True:
            await asyncio.sleep(interval)
            await self.probe(ping)


def redacted(url: str) -> str:
    """The URL without its password, for logs."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, hosts = rest.rpartition("@")
    if not at:
        return url
    user = userinfo.split(":", 1)[0]
    return f"{scheme}{sep}{user + ':' if user else ''}***@{hosts}"


CLOSE_SECONDS = 2.0
"""The most a background task or a connection may take to close at shutdown."""


async def cancel_quietly(task: asyncio.Task[Any] | None) -> None:
    """Cancel a background task and wait for it, whatever it ends with, but not forever."""
    if task is None:
        return
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=CLOSE_SECONDS)
    if not done:  # stuck in its own cleanup (a connection that will not close): shutdown goes on
        log.warning("store_task_stuck", task=task.get_name())
        return
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()


async def close_quietly(resource: Any) -> None:
    """`await resource.aclose()`, bounded, ignoring errors (closing to a dead Redis may fail)."""
    try:
        async with asyncio.timeout(CLOSE_SECONDS):
            await resource.aclose()
    except Exception:
        log.debug("store_close_failed", resource=type(resource).__name__)
