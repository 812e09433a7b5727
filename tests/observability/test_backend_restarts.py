"""`mcpgw_backend_restarts_total{backend}`: a stdio backend's child that dies and is started again."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from backend_fixtures import REPO_ROOT
from prometheus_client import CollectorRegistry

from gateway.config import Config, StdioBackend, TenantConfig
from gateway.metrics import Metrics
from gateway.upstream.pool import UpstreamPool

pytestmark = pytest.mark.timeout(60)


def restarts(metrics: Metrics) -> dict[str, float]:
    metrics.flush()
    return {s.labels["backend"]: s.value for m in metrics.registry.collect() if m.name == "mcpgw_backend_restarts"
            for s in m.samples if s.name.endswith("_total")}


async def test_a_dead_child_started_again_is_counted_for_its_backend() -> None:
    backend = StdioBackend(name="calc", namespace="calc", command=("python", "-m", "gateway.demo.calc"),
                           cwd=str(REPO_ROOT))
    metrics = Metrics(registry=CollectorRegistry(), tenants=["acme"], backends=["calc"])
    pool = UpstreamPool([backend], on_restart=metrics.backend_restarted)
    await pool.start()
    try:
        assert restarts(metrics) == {"calc": 0}  # the series exists from the start
        upstream = pool.get("calc")
        first = upstream.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        for _ in range(200):
            if upstream.pid not in (None, first):
                break
            await asyncio.sleep(0.05)
        assert upstream.pid not in (None, first), "the child was not started again"
        assert restarts(metrics) == {"calc": 1}
    finally:
        await pool.close()


def test_a_reload_gives_new_backends_and_tenants_their_own_labels() -> None:
    metrics = Metrics(registry=CollectorRegistry(), tenants=["acme"], backends=["calc"])
    assert metrics.backend_label("more") == "other"
    more = StdioBackend(name="more", namespace="more", command=("python",))
    metrics.reconfigure(Config(backends=(more,), tenants={"globex": TenantConfig(name="globex")}))
    assert metrics.backend_label("more") == "more" and metrics.backend_label("calc") == "other"
    assert metrics.tenant_label("globex") == "globex" and metrics.tenant_label("acme") == "other"
    assert restarts(metrics) == {"calc": 0, "more": 0}
