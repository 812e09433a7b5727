"""RoutedUpstream: a backend's upstream behind the routing policy (gateway.upstream.policy).

Per call, in this order:

1. the circuit breaker: an open circuit fails at once with CIRCUIT_OPEN;
2. the concurrency limit with a bounded queue: a call that finds the queue full fails at
   once with OVERLOADED (nothing ever waits in an unbounded queue);
3. the deadline: `timeout` seconds, extended by `timeout` on every progress notification
   of the call, never past the hard cap (`max_call_seconds`); when it passes, the call is
   cancelled, so the upstream tells the backend `notifications/cancelled`;
4. retries, only where `should_retry` allows them.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping

import structlog

from gateway.protocol.capabilities import NONE
from gateway.protocol.errors import FailureReason
from gateway.protocol.spec import PROGRESS
from gateway.tracing.context import CURRENT
from gateway.upstream.base import (
    JsonObject,
    ListChangedCallback,
    NotificationHandler,
    RequestHandler,
    ResourceUpdatedCallback,
    Upstream,
    UpstreamError,
)
from gateway.upstream.breaker import HALF_OPEN, OPEN, CircuitBreaker, Outcome, Ticket, Transition
from gateway.upstream.deadlines import Deadlines
from gateway.upstream.policy import RoutePolicy, breaker_outcome, extended_deadline, retry_delay, should_retry
from gateway.upstream.slots import Slots

log = structlog.get_logger("gateway.routing")

CircuitListener = Callable[[str, str], None]
"""Called with (backend, new state) on every circuit transition (e.g. Metrics.circuit_observed)."""


# ---------------------------------------------------------------- the limiter


class Limiter:
    """At most `concurrency` calls in flight and `queue` waiting; more fail at once."""

    def __init__(self, concurrency: int, queue: int) -> None:
        self._slots = Slots(concurrency)
        self._queue = queue
        self._concurrency = concurrency

    @property
    def protocol_version(self) -> str | None:
        """The MCP version the backend speaks now (None until known), for /admin/backends."""
        return getattr(self.inner, "protocol_version", None)

    @property
    def busy(self) -> int:
        """Calls holding a slot or waiting for one."""
        return self._concurrency - self._slots.free + self._slots.waiting

    def try_acquire(self) -> bool:
        """Take a free slot now (the usual case: no coroutine); pair with `release()`."""
        return self._slots.try_take()

    async def wait(self, backend: str) -> None:
        """Queue for a slot, unless the queue is full (`overloaded`); pair with `release()`."""
        if self._slots.waiting >= self._queue:
            queued = f"{backend}: {self._slots.waiting} calls already queued"
            raise UpstreamError(FailureReason.OVERLOADED, queued, sent=False)
        await self._slots.take()

    def release(self) -> None:
        self._slots.give()


# ---------------------------------------------------------------- the routed upstream


class RoutedUpstream:
    """An Upstream that applies breaker, limits, deadline and retries around another."""

    def __init__(self, inner: Upstream, policy: RoutePolicy, *, clock: Callable[[], float] = time.monotonic,
                 rand: Callable[[], float] = random.random, on_circuit_change: CircuitListener | None = None) -> None:
        self.name = inner.name
        self.inner = inner
        self.policy = policy
        self._clock = clock
        self._rand = rand
        self._on_circuit_change = on_circuit_change
        self._breaker = CircuitBreaker(policy.circuit)
        self._limiter = Limiter(policy.max_concurrency, policy.max_queue)
        self._deadlines = Deadlines()

    @property
    def circuit_state(self) -> str:
        """closed, open or half_open (shown by /admin/backends and mcpgw_circuit_open)."""
        return self._breaker.state(self._clock())

    @property
    def pid(self) -> int | None:
        """The stdio child's pid (None for HTTP backends), for forced-exit cleanup."""
        return getattr(self.inner, "pid", None)

    @property
    def protocol_version(self) -> str | None:
        """The MCP version the backend speaks now (None until known), for /admin/backends."""
        return getattr(self.inner, "protocol_version", None)

    @property
    def busy(self) -> int:
        """Calls in flight or queued here: a reload closes a retired upstream once this is 0."""
        return self._limiter.busy

    async def start(self) -> None:
        await self.inner.start()

    async def notify(self, method: str, params: JsonObject | None, *, session_key: str = "",
                     capabilities: frozenset[str] = NONE) -> None:
        await self.inner.notify(method, params, session_key=session_key, capabilities=capabilities)

    @property
    def server_capabilities(self) -> JsonObject:
        return self.inner.server_capabilities

    @property
    def list_ttl_ms(self) -> int | None:
        return getattr(self.inner, "list_ttl_ms", None)

    @property
    def eras(self) -> tuple[str, ...]:
        """The eras the backend is spoken to in (both, for a dual-era HTTP backend)."""
        return getattr(self.inner, "eras", ())

    @property
    def lists_per_client(self) -> bool:
        return getattr(self.inner, "lists_per_client", False)

    @property
    def announces(self) -> bool:
        return getattr(self.inner, "announces", True)

    def on_list_changed(self, callback: ListChangedCallback) -> None:
        self.inner.on_list_changed(callback)

    def on_resource_updated(self, callback: ResourceUpdatedCallback) -> None:
        self.inner.on_resource_updated(callback)

    async def close(self) -> None:
        await self.inner.close()

    async def request(
        self,
        method: str,
        params: JsonObject | None,
        *,
        timeout: float,  # noqa: ASYNC109 - the idle budget, extended by progress
        session_key: str = "",
        headers: Mapping[str, str] | None = None,
        on_notification: NotificationHandler | None = None,
        capabilities: frozenset[str] = NONE,
        on_request: RequestHandler | None = None,
    ) -> JsonObject:
        ticket = self._admit()
        outcome = Outcome.NEUTRAL  # cancelled by the caller, or never reached the backend
        try:
            reply = await self._bounded(method, params, timeout, (session_key, capabilities), headers,
                                        (on_notification, on_request))
            outcome = Outcome.SUCCESS
            return reply
        except _Queued as exc:
            raise exc.error from None  # waited out its budget in our queue: the backend is not to blame
        except UpstreamError as exc:
            outcome = breaker_outcome(exc)
            raise
        finally:
            self._record(ticket, outcome)

    # ---------------------------------------------------------------- breaker

    def _admit(self) -> Ticket:
        now = self._clock()
        ticket = self._breaker.admit(now)
        if ticket is Ticket.REFUSED:
            wait = self._breaker.retry_after(now)
            refused = f"{self.name}: circuit open (probe in {wait:.1f}s)"
            raise UpstreamError(FailureReason.CIRCUIT_OPEN, refused, sent=False)
        if ticket is Ticket.PROBE:
            log.info("circuit_half_open", backend=self.name)
            self._notify_change(Transition(OPEN, HALF_OPEN, "cooldown over"))
        return ticket

    def _record(self, ticket: Ticket, outcome: Outcome) -> None:
        transition = self._breaker.record(self._clock(), ticket, outcome)
        if transition is None:
            return
        if transition.new == OPEN:
            log.warning("circuit_opened", backend=self.name, why=transition.why, previous=transition.old,
                        cooldown_seconds=self.policy.circuit.cooldown_seconds)
        else:
            log.info("circuit_closed", backend=self.name, why=transition.why)
        self._notify_change(transition)

    def _notify_change(self, transition: Transition) -> None:
        if self._on_circuit_change is not None:
            self._on_circuit_change(self.name, transition.new)

    # ---------------------------------------------------------------- limits and deadline

    async def _bounded(self, method: str, params: JsonObject | None, timeout: float,  # noqa: ASYNC109
                       key: tuple[str, frozenset[str]], headers: Mapping[str, str] | None,
                       handlers: tuple[NotificationHandler | None, RequestHandler | None]) -> JsonObject:
        loop = asyncio.get_running_loop()
        started, cap = loop.time(), self.policy.cap(timeout)
        in_slot = False
        scope = asyncio.timeout(None)  # armed by self._deadlines only when the deadline nears
        try:
            async with scope:
                self._deadlines.watch(scope, started + timeout, loop)
                if not self._limiter.try_acquire():
                    await self._limiter.wait(self.name)
                in_slot = True
                try:
                    handler = _extending(scope, loop, started, timeout, cap, handlers[0])
                    return await self._attempts(method, params, key, headers, (handler, handlers[1]))
                finally:
                    self._limiter.release()
        except TimeoutError as exc:
            elapsed = loop.time() - started
            error = UpstreamError(FailureReason.TIMEOUT, f"{self.name}: {method} timed out ({elapsed:.1f}s)")
            if not in_slot:
                raise _Queued(error) from exc
            raise error from exc
        finally:
            self._deadlines.forget(scope)  # no await since the scope's exit: no sweep saw it ended

    async def _attempts(self, method: str, params: JsonObject | None, key: tuple[str, frozenset[str]],
                        headers: Mapping[str, str] | None,
                        handlers: tuple[NotificationHandler, RequestHandler | None]) -> JsonObject:
        attempt = 0
        while True:
            try:
                # timeout=None: the scope in _bounded bounds every attempt (and the retry waits).
                return await self.inner.request(method, params, timeout=None, session_key=key[0],
                                                headers=headers, on_notification=handlers[0],
                                                capabilities=key[1], on_request=handlers[1])
            except UpstreamError as exc:
                if not should_retry(method, exc, attempt, self.policy.retries):
                    raise
                log.debug("upstream_retry", backend=self.name, method=method, reason=exc.reason, attempt=attempt)
                if (span := CURRENT.get()) is not None:  # the call's CLIENT span (tracing on)
                    span.count("mcpgw.upstream.retries")
            await asyncio.sleep(retry_delay(attempt, self._rand))
            attempt += 1


class _Queued(Exception):
    """A timeout that struck while the call still waited for a slot."""

    def __init__(self, error: UpstreamError) -> None:
        super().__init__(str(error))
        self.error = error


def _extending(scope: asyncio.Timeout, loop: asyncio.AbstractEventLoop, started: float, timeout: float,
               cap: float, forward: NotificationHandler | None) -> NotificationHandler:
    """A notification handler that pushes the deadline on progress, then forwards the message."""

    async def handler(message: JsonObject) -> None:
        if message.get("method") == PROGRESS:
            scope.reschedule(extended_deadline(loop.time(), started, timeout, cap))
        if forward is not None:
            await forward(message)

    return handler
