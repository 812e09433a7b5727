"""Batched hot-path metrics show exactly what prometheus-client's own metrics would, by its public API only."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from backend_fixtures import REPO_ROOT
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from gateway.metrics import LATENCY_BUCKETS, Metrics
from observability.helpers import Samples, samples_of

# Dyadic fractions of a second: their sums are exact in floating point, whatever the order.
SECONDS = [0.0009765625, 0.00390625, 0.0078125, 0.25, 0.75, 3.0, 40.0, 0.0009765625, 0.0625]
CALLS = [("tools/call", "acme", "ok"), ("tools/list", "acme", "ok"), ("tools/call", "other", "error")]
FAMILIES = ("mcpgw_requests_total", "mcpgw_request_duration_seconds")


def _traffic(metrics: Metrics, rounds: int = 1) -> None:
    for _ in range(rounds):
        for index, seconds in enumerate(SECONDS):
            method, tenant, outcome = CALLS[index % len(CALLS)]
            metrics.request_done(method=method, tenant=tenant, outcome=outcome, seconds=seconds,
                                 request_id=f"r{index}")


def _reference(rounds: int = 1) -> Samples:
    """The same traffic through plain prometheus-client Counter.inc() and Histogram.observe()."""
    registry = CollectorRegistry()
    requests = Counter("mcpgw_requests_total", "", ("method", "tenant", "outcome"), registry=registry)
    durations = Histogram("mcpgw_request_duration_seconds", "", ("method", "tenant"), registry=registry,
                          buckets=LATENCY_BUCKETS)
    for _ in range(rounds):
        for index, seconds in enumerate(SECONDS):
            method, tenant, outcome = CALLS[index % len(CALLS)]
            requests.labels(method, tenant, outcome).inc()
            durations.labels(method, tenant).observe(seconds)
    return _only(samples_of(generate_latest(registry).decode()))


def _only(samples: Samples) -> Samples:
    return {key: value for key, value in samples.items()
            if key[0].startswith(FAMILIES) and not key[0].endswith("_created")}


def test_one_process_exposes_exactly_what_plain_observe_would() -> None:
    metrics = Metrics(registry=CollectorRegistry(), tenants=["acme"], backends=["calc"])
    _traffic(metrics)
    exposed = _only(samples_of(generate_latest(metrics.registry).decode()))
    assert exposed == _reference()
    assert exposed[("mcpgw_request_duration_seconds_count", frozenset({("method", "tools/call"),
                                                                       ("tenant", "acme")}))] == 3


MULTIPROCESS_SCRIPT = """
import json, os, sys
from prometheus_client import CollectorRegistry
from gateway.metrics import Metrics, multiprocess_dir_from_env, render
from observability.test_batch import _traffic

def metrics():
    return Metrics(registry=CollectorRegistry(), tenants=["acme"], backends=["calc"],
                   multiprocess_dir=multiprocess_dir_from_env())

for rounds in (1, 2):  # two workers, three rounds of the traffic between them
    pid = os.fork()
    if pid == 0:
        worker = metrics()
        _traffic(worker, rounds)
        worker.flush()
        os._exit(0)
    os.waitpid(pid, 0)
print(json.dumps(render(metrics(), "")[0].decode()))
"""


def test_multiprocess_mode_hands_over_exact_sums_and_counts(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "tests"), str(REPO_ROOT)])}
    done = subprocess.run([sys.executable, "-c", MULTIPROCESS_SCRIPT], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert _only(samples_of(json.loads(done.stdout.splitlines()[-1]))) == _reference(rounds=3)


def test_the_metrics_package_touches_no_private_attribute_of_another_object() -> None:
    """Only `self._x`: prometheus-client's internals (a child's `_sum`, `_buckets`) stay its own."""
    package = REPO_ROOT / "gateway" / "metrics"
    foreign = []
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"})):
                foreign.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert foreign == []
