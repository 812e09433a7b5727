"""A circuit breaker per backend, as a pure state machine (the caller passes the clock).

    closed ──(N consecutive failures, or failure ratio over the window)──> open
    open ──(cooldown elapsed: the next call is let through as the probe)──> half_open
    half_open ──(probe succeeded)──> closed
    half_open ──(probe failed)──> open (a new cooldown)

Only backend failures are fed in as failures (timeout, unavailable, bad_response); a tool
error or the backend's own JSON-RPC error is a success (the backend answered). Outcomes
that say nothing about the backend (the caller went away, the local queue was full) are
`neutral`: they only release the probe slot. No I/O, no asyncio, no logging here: callers
log the transitions `record` returns.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from enum import Enum

from gateway.config import CircuitConfig

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"
"""The states, as shown in /admin/backends and the `mcpgw_circuit_open` gauge."""

WINDOW_BUCKETS = 10
"""The ratio window is kept as this many time buckets: memory is constant at any call rate."""


class Outcome(Enum):
    SUCCESS = "success"
    FAILURE = "failure"
    NEUTRAL = "neutral"


class Ticket(Enum):
    """What `admit` decided; the caller hands it back to `record` with the outcome."""

    REFUSED = "refused"
    CALL = "call"
    PROBE = "probe"


# When to open and for how long: the config's own frozen object, used as it is.
CircuitPolicy = CircuitConfig


@dataclass(frozen=True, slots=True)
class Transition:
    """A state change, for the caller's log line and gauge."""

    old: str
    new: str
    why: str


class _Window:
    """Calls and failures over the last `seconds`, in fixed buckets (approximate at the edge)."""

    def __init__(self, seconds: float) -> None:
        self._width = seconds / WINDOW_BUCKETS
        self._buckets: deque[list[int]] = deque()  # [bucket index, calls, failures]

    def add(self, now: float, failed: bool) -> None:
        index = math.floor(now / self._width)
        self._expire(index)
        if not self._buckets or self._buckets[-1][0] != index:
            self._buckets.append([index, 0, 0])
        bucket = self._buckets[-1]
        bucket[1] += 1
        bucket[2] += int(failed)

    def totals(self, now: float) -> tuple[int, int]:
        self._expire(math.floor(now / self._width))
        return sum(b[1] for b in self._buckets), sum(b[2] for b in self._buckets)

    def clear(self) -> None:
        self._buckets.clear()

    def _expire(self, index: int) -> None:
        while self._buckets and self._buckets[0][0] <= index - WINDOW_BUCKETS:
            self._buckets.popleft()


class CircuitBreaker:
    """One backend's breaker; every method takes `now` (monotonic seconds)."""

    def __init__(self, policy: CircuitPolicy) -> None:
        self.policy = policy
        self._state = CLOSED
        self._opened_at = 0.0
        self._consecutive = 0
        self._probing = False
        self._window = _Window(policy.window_seconds)

    def state(self, now: float) -> str:
        """The state a caller would meet now (open turns half_open once the cooldown is over)."""
        if self._state == OPEN and now - self._opened_at >= self.policy.cooldown_seconds:
            return HALF_OPEN
        return self._state

    def admit(self, now: float) -> Ticket:
        """May a call go to the backend now? In half_open only one call (the probe) at a time."""
        state = self.state(now)
        if state == CLOSED:
            return Ticket.CALL
        if state == OPEN or self._probing:
            return Ticket.REFUSED
        self._state, self._probing = HALF_OPEN, True
        return Ticket.PROBE

    def retry_after(self, now: float) -> float:
        """Seconds until an open circuit lets a probe through (0 when it would now)."""
        if self._state != OPEN:
            return 0.0
        return max(0.0, self._opened_at + self.policy.cooldown_seconds - now)

    def record(self, now: float, ticket: Ticket, outcome: Outcome) -> Transition | None:
        """Feed the outcome of an admitted call; return the transition it caused, if any."""
        if ticket is Ticket.PROBE:
            return self._after_probe(now, outcome)
        if ticket is Ticket.REFUSED or outcome is Outcome.NEUTRAL or self._state != CLOSED:
            return None  # a call admitted before the circuit opened: the circuit already decided
        self._window.add(now, outcome is Outcome.FAILURE)
        if outcome is Outcome.SUCCESS:
            self._consecutive = 0
            return None
        self._consecutive += 1
        why = self._trip_reason(now)
        return self._open(now, why) if why else None

    def _after_probe(self, now: float, outcome: Outcome) -> Transition | None:
        self._probing = False
        if outcome is Outcome.SUCCESS:
            self._state, self._consecutive = CLOSED, 0
            self._window.clear()  # judge the recovered backend on fresh calls only
            return Transition(HALF_OPEN, CLOSED, "probe succeeded")
        if outcome is Outcome.FAILURE:
            return self._open(now, "probe failed")
        return None  # the probe was abandoned: the next call probes instead

    def _trip_reason(self, now: float) -> str | None:
        policy = self.policy
        if policy.failures and self._consecutive >= policy.failures:
            return f"{self._consecutive} consecutive failures"
        if not policy.failure_ratio:
            return None
        calls, failed = self._window.totals(now)
        if calls >= max(policy.min_calls, 1) and failed / calls >= policy.failure_ratio:
            return f"{failed} of {calls} calls failed in {policy.window_seconds:g}s"
        return None

    def _open(self, now: float, why: str) -> Transition:
        old = self._state
        self._state, self._opened_at, self._consecutive = OPEN, now, 0
        return Transition(old, OPEN, why)
