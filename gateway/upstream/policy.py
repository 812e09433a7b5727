"""Routing policy: the pure decisions `RoutedUpstream` applies around every backend call.

Retries only where they are safe: a request that never reached the backend, or an
idempotent read (`initialize`, `tools/list`, `ping`) that failed with UNAVAILABLE or
BAD_RESPONSE; a tools/call that may have reached the backend is never sent twice. Only
backend failures count against the breaker. Progress extends a call's deadline, never past
its hard cap. Each decision is a plain function, so tests state it as input -> decision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gateway.config import BackendConfig
from gateway.config.model import default_of
from gateway.protocol import spec
from gateway.protocol.errors import FailureReason
from gateway.upstream.base import UpstreamError
from gateway.upstream.breaker import CircuitPolicy, Outcome

IDEMPOTENT_METHODS = frozenset({spec.INITIALIZE, spec.TOOLS_LIST, spec.PING})
"""Reads a backend may see twice without harm."""
RETRYABLE_REASONS = frozenset({FailureReason.UNAVAILABLE, FailureReason.BAD_RESPONSE})
"""Failures of an idempotent read that a second try may not meet (a slow backend is not helped by more load)."""
BACKEND_FAILURES = frozenset({FailureReason.TIMEOUT, FailureReason.UNAVAILABLE, FailureReason.BAD_RESPONSE})
"""Reasons that count against the breaker; anything else says nothing about the backend."""
RETRY_BASE_SECONDS = 0.05
RETRY_MAX_SECONDS = 1.0
"""Retry n waits uniform(0, min(MAX, BASE * 2**n)) ("full jitter"): callers never retry in step."""


@dataclass(frozen=True, slots=True)
class RoutePolicy:
    """A backend's limits as the routed upstream applies them; unset ones take the config's defaults."""

    max_concurrency: int = default_of(BackendConfig, "max_concurrency")
    max_queue: int = default_of(BackendConfig, "max_queue")
    max_call_seconds: float | None = None  # None: 10 x the call's timeout
    retries: int = default_of(BackendConfig, "retries")
    circuit: CircuitPolicy = field(default_factory=CircuitPolicy)

    def cap(self, timeout: float) -> float:
        return max(timeout, self.max_call_seconds if self.max_call_seconds is not None else 10 * timeout)


def policy_for(backend: BackendConfig) -> RoutePolicy:
    return RoutePolicy(
        max_concurrency=backend.max_concurrency,
        max_queue=backend.max_queue,
        max_call_seconds=backend.call_cap_seconds,
        retries=backend.retries,
        circuit=backend.circuit,
    )


def should_retry(method: str, error: UpstreamError, attempt: int, retries: int) -> bool:
    """Retry attempt `attempt` (0-based) of `method` after `error`?"""
    if attempt >= retries:
        return False
    if not error.sent:
        return True  # the backend never saw it: sending it now is the first time
    return method in IDEMPOTENT_METHODS and error.reason in RETRYABLE_REASONS


def retry_delay(attempt: int, rand: Callable[[], float]) -> float:
    return rand() * min(RETRY_MAX_SECONDS, RETRY_BASE_SECONDS * 2**attempt)


def breaker_outcome(error: UpstreamError | None) -> Outcome:
    """A reply (result, tool error or the backend's own JSON-RPC error) is a success."""
    if error is None:
        return Outcome.SUCCESS
    return Outcome.FAILURE if error.reason in BACKEND_FAILURES else Outcome.NEUTRAL


def extended_deadline(now: float, started: float, timeout: float, cap: float) -> float:
    """The deadline after a progress notification at `now`: `timeout` more, within the cap."""
    return min(now + timeout, started + cap)
