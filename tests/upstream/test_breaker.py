"""The circuit breaker as a pure state machine: outcomes and a clock in, states and transitions out."""

from __future__ import annotations

from gateway.upstream.breaker import (
    CLOSED,
    HALF_OPEN,
    OPEN,
    CircuitBreaker,
    CircuitPolicy,
    Outcome,
    Ticket,
)

FAIL, OK, NEUTRAL = Outcome.FAILURE, Outcome.SUCCESS, Outcome.NEUTRAL


def breaker(**policy: float) -> CircuitBreaker:
    return CircuitBreaker(CircuitPolicy(**{"failures": 3, "cooldown_seconds": 10.0, **policy}))  # type: ignore[arg-type]


def feed(b: CircuitBreaker, now: float, *outcomes: Outcome) -> None:
    for outcome in outcomes:
        b.record(now, b.admit(now), outcome)


def test_it_opens_after_n_consecutive_failures_and_says_why() -> None:
    b = breaker()
    feed(b, 0.0, FAIL, FAIL)
    assert b.state(0.0) == CLOSED
    transition = b.record(0.0, b.admit(0.0), FAIL)
    assert transition is not None and (transition.old, transition.new) == (CLOSED, OPEN)
    assert "3 consecutive" in transition.why
    assert b.admit(1.0) is Ticket.REFUSED


def test_a_success_resets_the_consecutive_count() -> None:
    b = breaker()
    feed(b, 0.0, FAIL, FAIL, OK, FAIL, FAIL)
    assert b.state(0.0) == CLOSED


def test_neutral_outcomes_neither_open_nor_reset() -> None:
    b = breaker()
    feed(b, 0.0, FAIL, FAIL, NEUTRAL, NEUTRAL)
    assert b.state(0.0) == CLOSED
    feed(b, 0.0, FAIL)
    assert b.state(0.0) == OPEN


def test_it_opens_on_a_failure_ratio_over_the_window_once_there_are_enough_calls() -> None:
    b = breaker(failures=0, failure_ratio=0.5, min_calls=10, window_seconds=10.0)
    feed(b, 0.0, *[OK, FAIL] * 4)  # 8 calls: below min_calls
    assert b.state(0.0) == CLOSED
    feed(b, 1.0, OK, FAIL)  # 10 calls, 5 failed
    assert b.state(1.0) == OPEN


def test_old_calls_leave_the_ratio_window() -> None:
    b = breaker(failures=0, failure_ratio=0.5, min_calls=4, window_seconds=10.0)
    feed(b, 0.0, FAIL, FAIL, FAIL)
    feed(b, 20.0, OK, OK, OK, FAIL)  # the early failures are 20 s old: 1 of 4
    assert b.state(20.0) == CLOSED


def test_zero_turns_both_triggers_off() -> None:
    b = breaker(failures=0, failure_ratio=0.0)
    feed(b, 0.0, *[FAIL] * 100)
    assert b.state(0.0) == CLOSED


def test_after_the_cooldown_exactly_one_probe_goes_through() -> None:
    b = breaker()
    feed(b, 0.0, FAIL, FAIL, FAIL)
    assert b.state(9.9) == OPEN
    assert b.retry_after(9.0) == 1.0
    assert b.state(10.0) == HALF_OPEN
    assert b.admit(10.0) is Ticket.PROBE
    assert b.admit(10.1) is Ticket.REFUSED  # the probe is still out


def test_a_successful_probe_closes_the_circuit() -> None:
    b = breaker()
    feed(b, 0.0, FAIL, FAIL, FAIL)
    ticket = b.admit(10.0)
    transition = b.record(10.5, ticket, OK)
    assert transition is not None and (transition.old, transition.new) == (HALF_OPEN, CLOSED)
    assert b.admit(10.6) is Ticket.CALL


def test_a_failed_probe_opens_it_for_another_cooldown() -> None:
    b = breaker()
    feed(b, 0.0, FAIL, FAIL, FAIL)
    transition = b.record(11.0, b.admit(10.0), FAIL)
    assert transition is not None and transition.new == OPEN and transition.why == "probe failed"
    assert b.state(20.0) == OPEN
    assert b.state(21.0) == HALF_OPEN


def test_an_abandoned_probe_lets_the_next_call_probe() -> None:
    b = breaker()
    feed(b, 0.0, FAIL, FAIL, FAIL)
    assert b.record(10.0, b.admit(10.0), NEUTRAL) is None
    assert b.admit(10.1) is Ticket.PROBE


def test_late_results_of_calls_admitted_before_the_opening_change_nothing() -> None:
    b = breaker()
    early = [b.admit(0.0) for _ in range(5)]
    for ticket in early[:3]:
        b.record(0.0, ticket, FAIL)
    assert b.state(0.0) == OPEN
    assert b.record(0.1, early[3], OK) is None
    assert b.state(0.1) == OPEN
    probe = b.admit(10.0)
    assert b.record(10.1, early[4], OK) is None  # not the probe's result
    assert b.state(10.1) == HALF_OPEN
    b.record(10.2, probe, OK)
    assert b.state(10.2) == CLOSED


def test_a_closed_circuit_judges_the_recovered_backend_on_fresh_calls() -> None:
    b = breaker(failures=0, failure_ratio=0.5, min_calls=4)
    feed(b, 0.0, FAIL, FAIL, FAIL, FAIL)
    b.record(10.0, b.admit(10.0), OK)
    feed(b, 10.0, FAIL)  # one failure after recovery: 1 of 1, but below min_calls
    assert b.state(10.0) == CLOSED


def test_memory_is_constant_at_any_call_rate() -> None:
    b = breaker(failures=0, failure_ratio=0.9, min_calls=1, window_seconds=1.0)
    for i in range(100_000):
        b.record(i / 1000, b.admit(i / 1000), OK)
    assert len(b._window._buckets) <= 11
