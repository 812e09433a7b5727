"""Tool pinning's metrics: changes seen in backends' definitions, and items held for review.

Kept apart from `registry` (whose hooks run per request): both move at catalogue builds only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge

from gateway.metrics.registry import OTHER, Metrics


class IntegrityMetrics:
    def __init__(self, registry: CollectorRegistry, backends: Callable[[], Iterable[str]]) -> None:
        self.configured = backends  # the backends of the config in force (a reload may change them)
        self.changes = Counter("mcpgw_catalogue_changes", "Changes seen in a backend's tool, prompt or resource "
                               "definitions (changed, new or removed items).", ("backend",), registry=registry)
        self.items_held = Gauge("mcpgw_items_held", "Items of the backend held for review (not served).",
                                ("backend",), registry=registry, multiprocess_mode="livemax")
        for backend in self.backends:
            self.changes.labels(backend)
            self.items_held.labels(backend).set(0)

    @property
    def backends(self) -> frozenset[str]:
        return frozenset(self.configured())

    def changed(self, backend: str) -> None:
        self.changes.labels(self._label(backend)).inc()

    def held(self, counts: Mapping[str, int]) -> None:
        for backend in self.backends | counts.keys():
            self.items_held.labels(self._label(backend)).set(counts.get(backend, 0))

    def _label(self, backend: str) -> str:
        return backend if backend in self.backends else OTHER


def integrity_metrics(metrics: Metrics) -> IntegrityMetrics:
    """One per registry: a gateway's catalogue service may be built again (tests, stdio) on the same metrics."""
    found = vars(metrics).get("integrity")
    if found is None:
        found = vars(metrics)["integrity"] = IntegrityMetrics(metrics.registry, lambda: metrics.backends)
    return found
