"""gateway.upstream.policy: the pure retry, breaker and deadline decisions, and the policy from config."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import parse_config
from gateway.upstream.base import UpstreamError
from gateway.upstream.breaker import Outcome
from gateway.upstream.policy import (
    RETRY_MAX_SECONDS,
    breaker_outcome,
    extended_deadline,
    policy_for,
    retry_delay,
    should_retry,
)

# ---------------------------------------------------------------- pure decisions


@pytest.mark.parametrize(("method", "reason", "sent", "retry"), [
    ("tools/call", "unavailable", False, True),    # connection refused: it never left
    ("tools/call", "unavailable", True, False),    # reset after sending: it may have run
    ("tools/call", "timeout", True, False),
    ("tools/call", "bad_response", True, False),
    ("tools/list", "unavailable", True, True),     # an idempotent read
    ("tools/list", "bad_response", True, True),
    ("tools/list", "timeout", True, False),        # a slow backend is not helped by more load
    ("ping", "unavailable", True, True),
])
def test_only_unsent_requests_and_idempotent_reads_are_retried(method: str, reason: str, sent: bool,
                                                                retry: bool) -> None:
    assert should_retry(method, UpstreamError(reason, "x", sent=sent), 0, 2) is retry


def test_retries_stop_at_the_configured_count() -> None:
    unsent = UpstreamError("unavailable", "refused", sent=False)
    assert [should_retry("tools/call", unsent, n, 2) for n in range(4)] == [True, True, False, False]


def test_retry_delays_are_jittered_and_capped() -> None:
    assert [retry_delay(n, lambda: 1.0) for n in range(3)] == [0.05, 0.1, 0.2]
    assert retry_delay(30, lambda: 1.0) == RETRY_MAX_SECONDS
    assert retry_delay(3, lambda: 0.0) == 0.0


@pytest.mark.parametrize(("reason", "outcome"), [
    ("timeout", Outcome.FAILURE), ("unavailable", Outcome.FAILURE), ("bad_response", Outcome.FAILURE),
    ("overloaded", Outcome.NEUTRAL), ("circuit_open", Outcome.NEUTRAL),
])
def test_only_backend_failures_count_against_the_breaker(reason: str, outcome: Outcome) -> None:
    assert breaker_outcome(UpstreamError(reason, "x")) is outcome


def test_any_reply_is_a_success_for_the_breaker() -> None:
    assert breaker_outcome(None) is Outcome.SUCCESS


def test_progress_extends_the_deadline_up_to_the_cap() -> None:
    assert extended_deadline(now=5.0, started=0.0, timeout=2.0, cap=10.0) == 7.0
    assert extended_deadline(now=9.0, started=0.0, timeout=2.0, cap=10.0) == 10.0


def test_the_policy_comes_from_the_backend_config() -> None:
    raw = {"backends": [{"name": "b", "transport": "http", "url": "http://127.0.0.1:1/mcp", "timeout_seconds": 3,
                         "max_concurrency": 7, "max_queue": 0, "retries": 1,
                         "circuit": {"failures": 2, "cooldown_seconds": 4}}]}
    policy = policy_for(parse_config(raw, {}).backends[0])
    assert (policy.max_concurrency, policy.max_queue, policy.retries) == (7, 0, 1)
    assert policy.cap(3.0) == 30.0  # no max_call_seconds: 10 x timeout
    assert (policy.circuit.failures, policy.circuit.cooldown_seconds) == (2, 4.0)


@pytest.mark.parametrize(("extra", "message"), [
    ({"max_call_seconds": 1}, "backends[0].max_call_seconds: must be a number >= timeout_seconds"),
    ({"max_queue": -1}, "backends[0].max_queue: must be an integer >= 0"),
    ({"max_response_bytes": 10}, "backends[0].max_response_bytes: must be an integer >= 1024"),
    ({"circuit": {"failure_ratio": 1.5}}, "backends[0].circuit.failure_ratio: must be a number between 0 and 1"),
    ({"circuit": {"cooldown": 1}}, "backends[0].circuit.cooldown: unknown key"),
])
def test_bad_reliability_keys_are_reported_with_their_path(extra: dict[str, Any], message: str) -> None:
    raw = {"backends": [{"name": "b", "transport": "http", "url": "http://127.0.0.1:1/mcp", "timeout_seconds": 3,
                         **extra}]}
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_config(raw, {})
