"""The last minutes of traffic per backend and per tenant, from the gateway's own counters.

The status page shows calls per second, error shares and latency quantiles over a recent
window without a Prometheus server. Nothing here runs on a request's path: a background task
reads the cumulative totals the registry already holds every SAMPLE_SECONDS (exactly what
`/metrics` renders: every worker's, in multiprocess mode), reduces them to a few numbers per
backend and tenant, and keeps HISTORY_SECONDS of such readings. A window's figures are the
difference between a reading taken now and the one kept from the window's start, so a counter
reset (a new worker's) never shows as negative traffic.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gateway.metrics.tally import BOUNDS, BackendCounts, Reader, Reading, TenantCounts

SAMPLE_SECONDS = 10.0
"""How often the totals are read: the finest step of a window and of its series."""
HISTORY_SECONDS = 900.0
"""How far back readings are kept: the longest window the page can ask for."""

def quantile(q: float, per_bucket: Sequence[float], bounds: Sequence[float] = BOUNDS) -> float | None:
    """The q-quantile of observations counted per bucket (upper `bounds`, +Inf last), interpolated
    within its bucket as Prometheus's `histogram_quantile` does; None without observations. Past the
    last finite bound: that bound."""
    total = sum(per_bucket)
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for bound, count in zip(bounds, per_bucket, strict=True):
        if below + count >= rank:
            if math.isinf(bound):
                return lower
            if count == 0:
                return bound
            return lower + (bound - lower) * (rank - below) / count
        lower, below = bound, below + count
    return lower


def _delta(new: float, old: float) -> float:
    """Growth of a counter; a reset (a worker started anew) counts from zero."""
    return _whole(new - old if new >= old else new)


def _whole(value: float) -> float:
    """Counts are floats in prometheus-client: shown as integers when they are whole."""
    return int(value) if value.is_integer() else value


def _rate(count: float, seconds: float) -> float | None:
    return round(count / seconds, 4) if seconds > 0 else None


def _share(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole > 0 else None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


class TrafficWindow:
    """Readings of the totals over the last HISTORY_SECONDS, and the figures of any window within them."""

    def __init__(self, read: Reader, *, every: float = SAMPLE_SECONDS,
                 keep: float = HISTORY_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self._read = read
        self.every = every
        self.keep = keep
        self._clock = clock
        self._history: deque[Reading] = deque(maxlen=math.ceil(keep / every) + 1)
        self._origin = Reading(clock(), {}, {})
        """Every total is zero when the gateway starts: the start of a window older than the first reading
        (which may be taken after the first calls, in a worker that is slow to start sampling)."""

    async def sample(self) -> Reading:
        """Read the totals and keep the reading (the background task does this every `every` seconds)."""
        reading = await self._read(self._clock())
        self._history.append(reading)
        return reading

    async def now(self) -> Reading:
        """The totals now (not kept): a window ends with what /metrics would say at this instant."""
        return await self._read(self._clock())

    async def run(self) -> None:
        """Sample now and every `every` seconds, until cancelled."""
        while True:
            await self.sample()
            await asyncio.sleep(self.every)

    async def span(self, seconds: float) -> tuple[Reading, Reading, list[Reading]]:
        """The window of the last `seconds` (or as much of it as is kept): its first and last
        readings, and the kept readings in between for its series."""
        end = await self.now()
        start_at = end.at - min(seconds, self.keep)
        kept = [r for r in self._history if r.at < end.at]
        if len(self._history) < (self._history.maxlen or 0) and start_at < self._origin.at + self.every / 2:
            kept.insert(0, self._origin)  # nothing dropped yet: the window reaches back to the start
        inside = [r for r in kept if r.at >= start_at - self.every / 2]
        start = inside[0] if inside else (kept[-1] if kept else end)
        return start, end, [*inside[1:], end]

    async def backends(self, seconds: float, names: Iterable[str]) -> dict[str, dict[str, Any]]:
        """For each backend named: calls, failures, tool errors, rates and latency quantiles over the
        window, the calls per second of each step (the series), and its totals since the start."""
        start, end, steps = await self.span(seconds)
        return {name: _backend_figures(name, start, end, steps) for name in names}

    async def tenants(self, seconds: float, names: Iterable[str]) -> dict[str, dict[str, Any]]:
        """For each tenant named: requests, failures, refusals and tool calls over the window, and their totals."""
        start, end, _ = await self.span(seconds)
        return {name: _tenant_figures(end.tenants.get(name, TenantCounts()), start.tenants.get(name, TenantCounts()),
                                      end.at - start.at) for name in names}


def _backend_figures(name: str, start: Reading, end: Reading, steps: list[Reading]) -> dict[str, Any]:
    now, then = end.backends.get(name, BackendCounts()), start.backends.get(name, BackendCounts())
    seconds = end.at - start.at
    calls, failed = _delta(now.calls, then.calls), _delta(now.failed, then.failed)
    buckets = [_delta(count, before) for count, before in zip(now.buckets, then.buckets, strict=True)]
    series, previous = [], start
    for step in steps:
        before = previous.backends.get(name, BackendCounts()).calls
        series.append(_rate(_delta(step.backends.get(name, BackendCounts()).calls, before), step.at - previous.at))
        previous = step
    return {"covered_seconds": round(seconds, 3), "calls": calls, "failed": failed,
            "tool_errors": _delta(now.tool_errors, then.tool_errors), "calls_per_second": _rate(calls, seconds),
            "error_rate": _share(failed, calls), "p50_ms": _ms(quantile(0.5, buckets)),
            "p95_ms": _ms(quantile(0.95, buckets)), "series": series,
            "totals": {"calls": _whole(now.calls), "failed": _whole(now.failed), "tool_errors": _whole(now.tool_errors),
                       "restarts": _whole(now.restarts)}}


def _tenant_figures(now: TenantCounts, then: TenantCounts, seconds: float) -> dict[str, Any]:
    requests = _delta(now.requests, then.requests)
    return {"covered_seconds": round(seconds, 3), "requests": requests, "requests_per_second": _rate(requests, seconds),
            "failed": _delta(now.failed, then.failed), "rate_limited": _delta(now.rate_limited, then.rate_limited),
            "denied": _delta(now.denied, then.denied), "tool_calls": _delta(now.tool_calls, then.tool_calls),
            "totals": {"requests": _whole(now.requests), "rate_limited": _whole(now.rate_limited),
                       "denied": _whole(now.denied), "tool_calls": _whole(now.tool_calls)}}
