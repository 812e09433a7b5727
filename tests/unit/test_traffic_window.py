"""The status page's traffic window: the last minutes of the gateway's own counters.

The counters are the real `Metrics` hooks the request path calls; the window reads their running
totals (and, in multiprocess mode, a collection as `/metrics` renders it), on a clock the test moves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry

from gateway.metrics import Metrics, collected
from gateway.metrics.batch import LATENCY_BUCKETS
from gateway.metrics.tally import BOUNDS, Reading, read_families, read_totals, reader
from gateway.metrics.window import TrafficWindow, quantile


@dataclass
class Named:
    name: str


@dataclass
class Call:
    """What the dispatcher reports of one tools/call."""

    backend: str
    tool: str = "add"
    outcome: str = "ok"
    tenant: Named = field(default_factory=lambda: Named("acme"))
    request_id: str = "r"
    traceparent: str | None = None


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def metrics() -> Metrics:
    return Metrics(registry=CollectorRegistry(), tenants=["acme", "globex"], backends=["calc", "clock"])


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def window(metrics: Metrics, clock: Clock) -> TrafficWindow:
    return TrafficWindow(reader(metrics), every=5.0, keep=60.0, clock=clock)


def call(metrics: Metrics, backend: str, seconds: float, outcome: str = "ok", tenant: str = "acme") -> None:
    metrics.dispatched("tools/call", Call(backend, outcome=outcome, tenant=Named(tenant)), seconds)


def test_quantiles_interpolate_within_their_bucket_as_prometheus_does() -> None:
    bounds, counts = (0.001, 0.0025, 0.005, math.inf), [0.0, 50.0, 50.0, 0.0]
    assert quantile(0.5, counts, bounds) == pytest.approx(0.0025)  # the 50th observation closes the second bucket
    assert quantile(0.25, counts, bounds) == pytest.approx(0.00175)  # halfway through (0.001, 0.0025]
    assert quantile(0.95, counts, bounds) == pytest.approx(0.00475)


def test_a_quantile_past_the_last_finite_bound_is_that_bound_and_none_without_observations() -> None:
    assert quantile(0.95, [1.0, 9.0], (0.5, math.inf)) == 0.5
    assert quantile(0.5, [0.0] * len(BOUNDS)) is None


async def test_calls_failures_and_latency_per_backend_over_the_window(metrics: Metrics, window: TrafficWindow,
                                                               clock: Clock) -> None:
    await window.sample()
    for _ in range(8):
        call(metrics, "calc", 0.002)
    call(metrics, "calc", 0.2, outcome="timeout")
    call(metrics, "calc", 0.003, outcome="tool_error")
    call(metrics, "calc", 0.001, outcome="unauthorized")  # a user yet to connect: counted as the alerts count it
    clock.now += 10
    calc = (await window.backends(60, ["calc", "clock"]))["calc"]
    assert (calc["calls"], calc["failed"], calc["tool_errors"]) == (11, 1, 1)
    assert calc["covered_seconds"] == 10 and calc["calls_per_second"] == 1.1
    assert calc["error_rate"] == round(1 / 11, 4)
    assert 1.0 < calc["p50_ms"] <= 2.5 and 100 < calc["p95_ms"] <= 250
    assert (await window.backends(60, ["clock"]))["clock"]["calls"] == 0  # a backend nobody called


async def test_calls_before_the_window_do_not_count_and_the_totals_keep_them(metrics: Metrics, window: TrafficWindow,
                                                                      clock: Clock) -> None:
    await window.sample()
    for _ in range(5):
        call(metrics, "calc", 0.002)
    for _ in range(12):  # a minute of samples, every 5 s, with no calls
        clock.now += 5
        await window.sample()
    call(metrics, "calc", 0.002, outcome="unavailable")
    clock.now += 5
    calc = (await window.backends(30, ["calc"]))["calc"]
    assert (calc["calls"], calc["failed"], calc["error_rate"]) == (1, 1, 1.0)
    assert calc["covered_seconds"] == 30
    assert calc["totals"] == {"calls": 6, "failed": 1, "tool_errors": 0, "restarts": 0}
    assert calc["series"] == [0.0] * 5 + [0.2]  # calls per second of each 5 s step


async def test_the_window_reaches_no_further_back_than_what_is_kept(window: TrafficWindow, clock: Clock) -> None:
    for _ in range(40):  # 200 s of samples; 60 s are kept
        await window.sample()
        clock.now += 5
    assert (await window.backends(900, ["calc"]))["calc"]["covered_seconds"] == pytest.approx(60, abs=5)


async def test_calls_before_the_first_reading_count_in_a_window_that_reaches_back_to_the_start(
        metrics: Metrics, window: TrafficWindow, clock: Clock) -> None:
    for _ in range(3):  # a worker slow to start sampling: the calls come first
        call(metrics, "calc", 0.002)
    clock.now += 2
    await window.sample()
    clock.now += 3
    calc = (await window.backends(60, ["calc"]))["calc"]
    assert (calc["calls"], calc["covered_seconds"]) == (3, 5)
    assert (await window.backends(2, ["calc"]))["calc"]["calls"] == 0  # a window that starts after them


async def test_a_window_ends_now_not_at_the_last_sample(metrics: Metrics, window: TrafficWindow,
                                                        clock: Clock) -> None:
    await window.sample()
    call(metrics, "calc", 0.002)  # within the same instant as the sample
    assert (await window.backends(60, ["calc"]))["calc"]["totals"]["calls"] == 1


async def test_tenants_requests_refusals_and_tool_calls(metrics: Metrics, window: TrafficWindow, clock: Clock) -> None:
    await window.sample()
    for outcome in ("ok", "ok", "rate_limited", "forbidden", "unavailable"):
        metrics.request_done(method="tools/call", tenant="globex", outcome=outcome, seconds=0.01)
    metrics.rate_limit_hit("globex")
    call(metrics, "calc", 0.002, tenant="globex")
    clock.now += 4
    globex = (await window.tenants(60, ["globex", "acme"]))["globex"]
    assert (globex["requests"], globex["failed"], globex["denied"], globex["rate_limited"]) == (5, 1, 1, 1)
    assert globex["tool_calls"] == 1 and globex["requests_per_second"] == 1.25
    assert globex["totals"] == {"requests": 5, "rate_limited": 1, "denied": 1, "tool_calls": 1}
    assert (await window.tenants(60, ["acme"]))["acme"]["requests"] == 0


async def test_restarts_are_counted_since_the_start(metrics: Metrics, window: TrafficWindow, clock: Clock) -> None:
    await window.sample()
    metrics.backend_restarted("clock")
    metrics.backend_restarted("clock")
    clock.now += 5
    assert (await window.backends(60, ["clock"]))["clock"]["totals"]["restarts"] == 2


async def test_a_counter_that_went_back_to_zero_counts_from_zero() -> None:
    """A worker that started anew (multiprocess mode) resets its own series: no negative traffic."""
    before, after = Metrics(registry=CollectorRegistry(), tenants=["acme"], backends=["calc"]), None
    for _ in range(5):
        call(before, "calc", 0.002)
    after = Metrics(registry=CollectorRegistry(), tenants=["acme"], backends=["calc"])
    call(after, "calc", 0.002)
    readings = iter([reader(before), reader(after)])
    clock = Clock()
    async def read(at: float) -> Reading:
        return await next(readings)(at)

    window = TrafficWindow(read, every=5.0, keep=60.0, clock=clock)
    await window.sample()
    clock.now += 5
    assert (await window.backends(60, ["calc"]))["calc"]["calls"] == 1


async def test_the_running_totals_and_a_collection_read_the_same(metrics: Metrics) -> None:
    """One process reads its dicts; multiprocess mode reads what a scrape renders: the numbers agree."""
    for seconds, outcome in ((0.0004, "ok"), (0.003, "ok"), (0.7, "timeout"), (40.0, "tool_error")):
        call(metrics, "calc", seconds, outcome=outcome)
    metrics.request_done(method="ping", tenant="acme", outcome="forbidden", seconds=0.001)
    metrics.rate_limit_hit("globex")
    metrics.backend_restarted("clock")
    metrics.cache_lookup(hit=True)  # families the window does not read
    metrics.auth_failed("expired")
    totals = metrics.running_totals
    assert totals is not None
    direct, scraped = await read_totals(totals, 1.0, chunk=3), read_families(collected(metrics), 1.0)
    assert direct == scraped
    assert direct.backends["calc"].buckets == [1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    assert len(direct.backends["calc"].buckets) == len(LATENCY_BUCKETS) + 1
