"""Virtual servers' metrics: items withdrawn (their source gone, or a fixed argument no longer fits).

Labels are bounded: a server's name comes from the config, a reason from a fixed set.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from gateway.metrics.registry import Metrics


class ServerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.withdrawals = Counter("mcpgw_server_items_withdrawn", "Items of a virtual server withdrawn: their "
                                   "source disappeared, or a fixed argument no longer fits its schema.",
                                   ("server", "reason"), registry=registry)

    def withdrawn(self, server: str, reason: str) -> None:
        self.withdrawals.labels(server, reason).inc()


def server_metrics(metrics: Metrics) -> ServerMetrics:
    """One per registry: a gateway's catalogue service may be built again (tests, stdio) on the same metrics."""
    found = vars(metrics).get("servers")
    if found is None:
        found = vars(metrics)["servers"] = ServerMetrics(metrics.registry)
    return found
