"""/metrics: its own port when configured, OpenMetrics with exemplars when asked, multiprocess mode."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from backend_fixtures import REPO_ROOT, free_port
from conftest import RawClient, StartGateway, make_config, make_token, stdio_backend
from prometheus_client import CollectorRegistry

from gateway.metrics import MAX_AUTH_REASONS, Metrics, exemplar
from observability.helpers import sample, samples_of, scrape

pytestmark = pytest.mark.timeout(60)

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


async def test_a_metrics_port_serves_metrics_there_and_only_there(gateway: StartGateway) -> None:
    port = free_port()
    running = await gateway(make_config([stdio_backend("calc")], metrics={"port": port}))
    text, _ = await scrape(f"http://127.0.0.1:{port}/metrics")
    assert sample(samples_of(text), "mcpgw_backend_up", backend="calc") == 1
    async with aiohttp.ClientSession() as http, http.get(running.base + "metrics") as response:
        assert response.status == 404


async def test_openmetrics_scrapes_carry_exemplars_and_plain_ones_do_not(
    gateway: StartGateway, raw_client: Any
) -> None:
    running = await gateway(make_config([stdio_backend("calc")]))
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    await client.post(client.request("tools/call", {"name": "calc__add", "arguments": {"a": 1, "b": 1}}),
                      **{"X-Request-Id": "exemplar-1"})

    text, content_type = await scrape(running.base + "metrics", accept=OPENMETRICS)
    assert content_type.startswith("application/openmetrics-text") and text.endswith("# EOF\n")
    exemplars = re.findall(r'^mcpgw_(?:request|tool_call)_duration_seconds_bucket\{.*\} \d+\.0 # \{(.*)\}', text, re.M)
    assert any('request_id="exemplar-1"' in labels and 'trace_id="' in labels for labels in exemplars), exemplars

    plain, content_type = await scrape(running.base + "metrics")
    assert content_type.startswith("text/plain") and "exemplar-1" not in plain


def test_exemplars_stay_within_the_openmetrics_limit() -> None:
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert exemplar("abc", traceparent) == {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "request_id": "abc"}
    assert exemplar("x" * 128, traceparent) == {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}
    assert exemplar("x" * 118, None) == {"request_id": "x" * 118}


def test_auth_failure_reasons_are_capped() -> None:
    metrics = Metrics(registry=CollectorRegistry(), tenants=["acme"], backends=["calc"])
    for i in range(MAX_AUTH_REASONS + 5):
        metrics.auth_failed(f"reason_{i}")
    reasons = {s.labels["reason"] for m in metrics.registry.collect() if m.name == "mcpgw_auth_failures"
               for s in m.samples if s.name.endswith("_total")}
    assert len(reasons) == MAX_AUTH_REASONS + 1 and "other" in reasons


def test_label_values_are_bounded() -> None:
    metrics = Metrics(registry=CollectorRegistry(), tenants=["acme"], backends=["calc"])
    assert [metrics.tenant_label(t) for t in ("acme", "evil", None)] == ["acme", "other", "other"]
    assert [metrics.method_label(m) for m in ("tools/call", "batch", "x/y", None)] == [
        "tools/call", "batch", "other", "none"]


MULTIPROCESS_SCRIPT = """
import json, os, sys
from prometheus_client import CollectorRegistry, multiprocess
from gateway.metrics import Metrics, multiprocess_dir_from_env, render

def metrics():
    return Metrics(registry=CollectorRegistry(), tenants=["acme"], backends=["calc"],
                   multiprocess_dir=multiprocess_dir_from_env())

children = []
for calls in (2, 3):  # two workers, each serving some requests and holding some in flight
    pid = os.fork()
    if pid == 0:
        worker = metrics()
        for _ in range(calls):
            worker.request_done(method="tools/call", tenant="acme", outcome="ok", seconds=0.01)
        worker.inflight_add(calls)
        worker.circuit_observed("calc", "open" if calls == 2 else "closed")
        worker.flush()  # what a serving worker does every FLUSH_SECONDS and when it stops
        os._exit(0)
    os.waitpid(pid, 0)
    children.append(pid)
multiprocess.mark_process_dead(children[1])  # the second worker exited: its live gauges go
body, content_type = render(metrics(), "")
print(json.dumps({"content_type": content_type, "body": body.decode()}))
"""


def test_multiprocess_mode_adds_up_the_workers(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", MULTIPROCESS_SCRIPT], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    samples = samples_of(json.loads(done.stdout.splitlines()[-1])["body"])
    assert sample(samples, "mcpgw_requests_total", method="tools/call", tenant="acme", outcome="ok") == 5
    assert sample(samples, "mcpgw_request_duration_seconds_count", method="tools/call", tenant="acme") == 5
    assert sample(samples, "mcpgw_inflight_requests") == 2  # livesum: only the first worker's
    assert sample(samples, "mcpgw_circuit_open", backend="calc") == 1  # livemax


def test_multiprocess_needs_the_variable_before_prometheus_client_loads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gateway.metrics import multiprocess_dir_from_env

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    assert multiprocess_dir_from_env() is None  # this process loaded it without: per-process metrics


def test_exemplars_are_kept_once_per_bucket_per_interval() -> None:
    from gateway.metrics.batch import EXEMPLAR_INTERVAL, Family, Totals

    now = [100.0]
    registry = CollectorRegistry()
    family = Family("h", "h", ("route",), "histogram")
    totals = Totals([family], clock=lambda: now[0])
    registry.register(totals)

    def exemplar_ids() -> dict[tuple[str, str], str]:
        return {(s.labels["route"], s.labels["le"]): s.exemplar.labels["request_id"]
                for m in registry.collect() for s in m.samples if s.exemplar}

    totals.observe((family, "a"), 0.003, "r1")
    totals.observe((family, "a"), 0.004, "r2")  # same bucket (<= 5 ms), same second: counted, no exemplar
    totals.observe((family, "a"), 0.2, "r3")  # another bucket: a slow outlier still gets its exemplar
    totals.observe((family, "b"), 0.003, "r4")  # another label child
    assert exemplar_ids() == {("a", "0.005"): "r1", ("a", "0.25"): "r3", ("b", "0.005"): "r4"}
    now[0] += EXEMPLAR_INTERVAL
    totals.observe((family, "a"), 0.004, "r5")
    assert exemplar_ids()[("a", "0.005")] == "r5"
    assert registry.get_sample_value("h_count", {"route": "a"}) == 4  # exemplars or not, all counted
    assert registry.get_sample_value("h_bucket", {"route": "a", "le": "0.005"}) == 3
    assert registry.get_sample_value("h_sum", {"route": "a"}) == pytest.approx(0.211)
