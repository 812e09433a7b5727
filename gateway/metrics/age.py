"""`mcpgw_catalogue_age_seconds`: the one metric computed at scrape time, from the pushed fetch times."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client.metrics_core import GaugeMetricFamily, Metric


class CatalogueAge:
    """`mcpgw_catalogue_age_seconds`, computed at scrape time from each snapshot's fetched_at."""

    def __init__(self, fetched_at: Mapping[str, float], clock: Callable[[], float]) -> None:
        self.fetched_at = fetched_at
        self.clock = clock

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        now = self.clock()
        for backend, fetched in self.fetched_at.items():
            family.add_metric([backend], max(0.0, now - fetched))
        yield family

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily("mcpgw_catalogue_age_seconds",
                                 "Seconds since the backend's tools were last fetched successfully.",
                                 labels=["backend"])
