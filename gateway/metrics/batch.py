"""Hot-path metric updates as plain numbers, handed to prometheus-client through its public API.

A request updates a few counters and histograms. prometheus-client's `labels()`, `inc()` and
`observe()` take a lock per value (and, in multiprocess mode, write a shared file), so the hot
path adds up in plain dicts keyed by (family, *label values), and prometheus-client sees the
numbers in one of two ways:

- one process: `Totals` keeps running totals and is itself the registry's collector for those
  families, yielding CounterMetricFamily, GaugeMetricFamily and HistogramMetricFamily (with
  exemplars) at scrape time. Nothing is pending, so every read of the registry is exact.
- multiprocess mode (`--workers N`): `/metrics` aggregates only the per-process files that
  prometheus-client's own metric objects write, which a custom collector cannot reach. There
  `Deferred` keeps the pending increments and the raw observations and hands them over with
  the public `inc()` and `observe()` at each flush (every FLUSH_SECONDS and before a scrape):
  the same work as observing at once, done off the request. Multiprocess files keep no
  exemplars, so none are made.

Updates come from the event loop's thread only.
"""

from __future__ import annotations

import bisect
import collections
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.samples import Exemplar
from prometheus_client.utils import floatToGoString

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                   1.0, 2.5, 5.0, 10.0, 30.0)
"""Half a millisecond (the gateway's own overhead) up to 30 s (the default backend timeout)."""
BUCKET_NAMES = (*(floatToGoString(bound) for bound in LATENCY_BUCKETS), "+Inf")
"""The `le` label of each bucket, written as prometheus-client writes it."""

EXEMPLAR_INTERVAL = 1.0
"""Seconds between exemplars of one histogram bucket (scrapes come seconds apart; only the latest shows)."""
EXEMPLAR_ROOM = 128
"""OpenMetrics limit on an exemplar's label names and values, in characters."""
FLUSH_SECONDS = 1.0
"""In multiprocess mode, how often a worker hands its pending updates to the shared files."""

Kind = Literal["counter", "gauge", "histogram"]
Key = tuple[Any, ...]
"""(family, *label values): one series."""


@dataclass(eq=False, frozen=True, slots=True)  # eq=False: hashed by identity, the cheapest dict key
class Family:
    """A metric updated on the hot path: its name, help, label names and kind."""

    name: str
    documentation: str
    labelnames: tuple[str, ...] = ()
    kind: Kind = "counter"
    multiprocess_mode: str = "livesum"
    """How a gauge's per-worker values combine in multiprocess mode."""


def exemplar(request_id: str, traceparent: str | None) -> dict[str, str]:
    """Exemplar labels linking a latency sample to its request (OpenMetrics caps them at 128 chars)."""
    labels = {"trace_id": traceparent[3:35]} if traceparent else {}
    if len(request_id) <= EXEMPLAR_ROOM - sum(len(k) + len(v) for k, v in labels.items()) - len("request_id"):
        labels["request_id"] = request_id
    return labels


class Totals:
    """Running totals of the hot-path families, and the registry collector that shows them.

    An observation adds to its series' sum and bucket count; the first per bucket per
    EXEMPLAR_INTERVAL that carries a request id also becomes that bucket's exemplar.
    """

    def __init__(self, families: Sequence[Family], *, clock: Callable[[], float] = time.monotonic) -> None:
        self.families = tuple(families)
        self.counts: collections.Counter[Key] = collections.Counter()
        self.timings: dict[Key, list[float]] = {}  # sum, then one count per bucket (+Inf last)
        self.exemplars: dict[tuple[Key, int], Exemplar] = {}
        self._next_exemplar: dict[tuple[Key, int], float] = {}
        self._clock = clock

    def observe(self, key: Key, seconds: float, request_id: str | None = None,
                traceparent: str | None = None) -> None:
        bucket = bisect.bisect_left(LATENCY_BUCKETS, seconds)  # the first bound >= seconds, as prometheus has it
        slots = self.timings.get(key)
        if slots is None:
            slots = self.timings[key] = [0.0] * (len(LATENCY_BUCKETS) + 2)
        slots[0] += seconds
        slots[bucket + 1] += 1
        if request_id is None:
            return
        now, mark = self._clock(), (key, bucket)  # inline: this runs for most observations
        if now >= self._next_exemplar.get(mark, 0.0):
            self._next_exemplar[mark] = now + EXEMPLAR_INTERVAL
            self.exemplars[mark] = Exemplar(exemplar(request_id, traceparent), seconds, time.time())

    def flush(self) -> None:
        """Nothing to hand over: the registry reads the totals themselves."""

    def describe(self) -> Iterable[Metric]:
        return [_empty(family) for family in self.families]

    def collect(self) -> Iterable[Metric]:
        found = {family: _empty(family) for family in self.families}
        for key, value in self.counts.items():
            found[key[0]].add_metric(key[1:], value)
        for key, slots in self.timings.items():
            found[key[0]].add_metric(key[1:], self._buckets(key, slots), slots[0])
        return found.values()

    def _buckets(self, key: Key, slots: list[float]) -> list[Any]:
        """Cumulative (le, count[, exemplar]) pairs, +Inf last."""
        buckets: list[Any] = []
        total = 0.0
        for index, name in enumerate(BUCKET_NAMES):
            total += slots[index + 1]
            sample = self.exemplars.get((key, index))
            buckets.append((name, total) if sample is None else (name, total, sample))
        return buckets


def _empty(family: Family) -> Any:
    kinds = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily, "histogram": HistogramMetricFamily}
    return kinds[family.kind](family.name, family.documentation, labels=family.labelnames)


class Deferred:
    """Pending increments and raw observations, handed to prometheus-client's metrics at `flush`."""

    def __init__(self, families: Sequence[Family], registry: CollectorRegistry) -> None:
        self.counts: collections.Counter[Key] = collections.Counter()
        self.timings: dict[Key, list[float]] = {}
        registry.register(_FlushFirst(self.flush))  # before the metrics, so it runs before they are read
        self._metrics = {family: _metric(family, registry) for family in families}
        self._children: dict[Key, Any] = {}

    def observe(self, key: Key, seconds: float, request_id: str | None = None,
                traceparent: str | None = None) -> None:
        values = self.timings.get(key)
        if values is None:
            self.timings[key] = [seconds]
        else:
            values.append(seconds)

    def flush(self) -> None:
        counts, self.counts = self.counts, collections.Counter()
        timings, self.timings = self.timings, {}
        for key, amount in counts.items():
            child = self._child(key)  # made even for 0: the series shows from the start
            if amount:
                child.inc(amount)
        for key, values in timings.items():
            child = self._child(key)
            for value in values:
                child.observe(value)

    def _child(self, key: Key) -> Any:
        """The prometheus-client child of a series, made once (`labels()` takes a lock)."""
        child = self._children.get(key)
        if child is None:
            metric = self._metrics[key[0]]
            child = self._children[key] = metric.labels(*key[1:]) if key[1:] else metric
        return child


def _metric(family: Family, registry: CollectorRegistry) -> Counter | Gauge | Histogram:
    name, doc, labels = family.name, family.documentation, family.labelnames
    if family.kind == "histogram":
        return Histogram(name, doc, labels, registry=registry, buckets=LATENCY_BUCKETS)
    if family.kind == "gauge":
        return Gauge(name, doc, labels, registry=registry, multiprocess_mode=family.multiprocess_mode)  # type: ignore[arg-type]
    return Counter(name, doc, labels, registry=registry)


class _FlushFirst:
    """A collector registered before every metric: any read of the registry flushes first."""

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        self._flush()
        return []


Batch = Totals | Deferred
