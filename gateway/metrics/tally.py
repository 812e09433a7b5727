"""The gateway's cumulative totals, added up per backend and per tenant: one reading of them.

The status page's traffic window (window.py) takes a reading every few seconds, so a reading
must cost little and never hold the event loop long, whatever the catalogue's size. In one
process the hot-path totals are copied as they are (`Totals`: plain dicts, no metric objects
made) and added up a chunk at a time, letting requests run in between; in multiprocess mode only
a collection of every worker's files adds the workers up, so the families a scrape would render
are collected on a worker thread. Both give the same numbers as `/metrics`.
"""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric

from gateway.metrics.batch import LATENCY_BUCKETS, Totals
from gateway.metrics.endpoint import collected
from gateway.metrics.registry import SERVER_ERROR_OUTCOMES, Metrics

FAILED = SERVER_ERROR_OUTCOMES | {"backend_error"}
"""Call outcomes that count as failures: the gateway or the backend gave no proper answer, as the
alert rules count them (a tool's own `isError` result is counted apart, as a tool error; a user yet
to connect a per-user grant, `unauthorized`, is not the backend failing)."""
TOOL_ERROR = "tool_error"
DENIED = "forbidden"
"""The request outcome of a 403: a token without the scope, or a tenant the caller may not act for."""
BOUNDS = (*LATENCY_BUCKETS, math.inf)
"""The upper bound of each latency bucket, +Inf last."""


@dataclass(slots=True)
class BackendCounts:
    """Cumulative totals for one backend, summed over tenants and tools."""

    calls: float = 0.0
    failed: float = 0.0
    tool_errors: float = 0.0
    restarts: float = 0.0
    buckets: list[float] = field(default_factory=lambda: [0.0] * len(BOUNDS))  # calls per latency bucket


@dataclass(slots=True)
class TenantCounts:
    """Cumulative totals for one tenant."""

    requests: float = 0.0
    failed: float = 0.0
    rate_limited: float = 0.0
    denied: float = 0.0
    tool_calls: float = 0.0


@dataclass(frozen=True, slots=True)
class Reading:
    """The totals at one instant (`at`, on the monotonic clock)."""

    at: float
    backends: dict[str, BackendCounts]
    tenants: dict[str, TenantCounts]


class Tally:
    """Adds series up into backend and tenant totals; one method per family read, by its labels."""

    def __init__(self) -> None:
        self.backends: defaultdict[str, BackendCounts] = defaultdict(BackendCounts)
        self.tenants: defaultdict[str, TenantCounts] = defaultdict(TenantCounts)
        self.counters: dict[str, Callable[..., None]] = {
            "mcpgw_tool_calls_total": self.tool_call,  # tenant, backend, tool, outcome
            "mcpgw_requests_total": self.request,  # method, tenant, outcome
            "mcpgw_rate_limited_total": self.rate_limited,  # tenant
            "mcpgw_policy_denied_total": self.policy_denied,  # tenant, reason: per-caller policy, where it exists
            "mcpgw_backend_restarts_total": self.restart,  # backend
        }

    def tool_call(self, value: float, tenant: str, backend: str, tool: str, outcome: str) -> None:
        counts = self.backends[backend]
        counts.calls += value
        if outcome in FAILED:
            counts.failed += value
        elif outcome == TOOL_ERROR:
            counts.tool_errors += value
        self.tenants[tenant].tool_calls += value

    def request(self, value: float, method: str, tenant: str, outcome: str) -> None:
        counts = self.tenants[tenant]
        counts.requests += value
        if outcome in FAILED:
            counts.failed += value
        elif outcome == DENIED:
            counts.denied += value

    def rate_limited(self, value: float, tenant: str) -> None:
        self.tenants[tenant].rate_limited += value

    def policy_denied(self, value: float, tenant: str, reason: str = "") -> None:
        self.tenants[tenant].denied += value

    def restart(self, value: float, backend: str) -> None:
        self.backends[backend].restarts += value

    def call_buckets(self, backend: str, per_bucket: Sequence[float]) -> None:
        """One tool's calls per latency bucket (+Inf last), added to its backend's."""
        buckets = self.backends[backend].buckets
        for index, count in enumerate(per_bucket):
            buckets[index] += count

    def reading(self, at: float) -> Reading:
        return Reading(at, dict(self.backends), dict(self.tenants))


CALL_DURATION = "mcpgw_tool_call_duration_seconds"
CHUNK = 500
"""Series added up between two turns of the event loop (a few hundred microseconds of work)."""


async def read_totals(totals: Totals, at: float, chunk: int = CHUNK) -> Reading:
    """A reading of one process's running totals: copied at once (the requests served meanwhile
    change them), then added up a chunk at a time."""
    counts = list(totals.counts.items())
    calls = [(key[1], slots[1:]) for key, slots in totals.timings.items() if key[0].name == CALL_DURATION]
    tally = Tally()
    counters = tally.counters
    for start in range(0, len(counts), chunk):
        if start:
            await asyncio.sleep(0)
        for key, value in counts[start:start + chunk]:
            add = counters.get(key[0].name)
            if add is not None:
                add(value, *key[1:])
    for backend, per_bucket in calls:  # slots[0] is the sum
        tally.call_buckets(backend, per_bucket)
    return tally.reading(at)


def read_families(families: Iterable[Metric], at: float) -> Reading:
    """A reading of collected metric families (every worker's, in multiprocess mode)."""
    tally = Tally()
    cumulative: defaultdict[str, list[float]] = defaultdict(lambda: [0.0] * len(BOUNDS))
    index = {bound: i for i, bound in enumerate(BOUNDS)}
    for family in families:
        for sample in family.samples:
            add = tally.counters.get(sample.name)
            if add is not None:
                add(sample.value, **sample.labels)
            elif sample.name == f"{CALL_DURATION}_bucket":
                cumulative[sample.labels["backend"]][index[float(sample.labels["le"])]] += sample.value
    for backend, counts in cumulative.items():
        tally.call_buckets(backend, [count - (counts[i - 1] if i else 0.0) for i, count in enumerate(counts)])
    return tally.reading(at)


Reader = Callable[[float], Awaitable[Reading]]


def reader(metrics: Metrics) -> Reader:
    """How to take a reading of this app's metrics: their totals, or in multiprocess mode a collection."""
    totals = metrics.running_totals
    if totals is not None:
        return lambda at: read_totals(totals, at)

    async def read(at: float) -> Reading:
        families = collected(metrics)  # this worker's pending updates handed over here, on the loop
        return read_families(await asyncio.to_thread(list, families), at)  # the files read off it

    return read
