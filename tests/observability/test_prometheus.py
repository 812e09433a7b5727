"""A real Prometheus scrapes a gateway under load; every dashboard query and every rule runs on it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import RawClient, StartGateway, make_config, make_token, stdio_backend

from observability.prometheus_server import PrometheusServer, prometheus_binary, scrape_config

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy/grafana/mcp-gateway.json"
RULES = REPO / "deploy/prometheus/alerts.yaml"
TEMPLATE_VALUES = {"$__rate_interval": "1m", "$__interval": "1s", "$__range": "5m", "$tenant": ".*", "$backend": ".*"}
SCRAPES_NEEDED = 6
WAIT_SECONDS = 40.0

pytestmark = [
    pytest.mark.timeout(150),
    pytest.mark.skipif(prometheus_binary() is None,
                       reason="the prometheus binary is not installed (apt-get install -y prometheus)"),
]


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) for every panel target, template variables substituted."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [(panel["title"], substitute(target["expr"])) for panel in panels for target in panel.get("targets", [])]


def substitute(expr: str) -> str:
    for variable, value in sorted(TEMPLATE_VALUES.items(), key=lambda item: -len(item[0])):
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr


def rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


async def _load(running: Any, raw_client: Any, stop: asyncio.Event) -> None:
    """Every kind of traffic the dashboard shows: successes, tool errors, timeouts, 401s and 429s, prompts and reads."""
    acme: RawClient = raw_client(running.url, make_token("acme"))
    beta: RawClient = raw_client(running.url, make_token("beta"))
    stranger: RawClient = raw_client(running.url, None)
    await acme.initialize()
    await beta.initialize()
    slow: set[asyncio.Task[Any]] = set()
    while not stop.is_set():
        await acme.call("tools/list")
        await acme.call("tools/call", {"name": "calc__add", "arguments": {"a": 1, "b": 2}})
        await acme.call("tools/call", {"name": "calc__evaluate", "arguments": {"expression": "2**1000"}})
        await acme.call("prompts/get", {"name": "calc__explain", "arguments": {"expression": "1+1"}})
        await acme.call("resources/read", {"uri": "calc+calc://squares/4"})
        if len(slow) < 2:  # a timeout now and then, never blocking the rest of the load
            task = asyncio.ensure_future(acme.call("tools/call", {"name": "calc__slow", "arguments": {"seconds": 3}}))
            slow.add(task)
            task.add_done_callback(slow.discard)
        await beta.post(beta.request("tools/list"))  # mostly 429 once the burst is spent
        await stranger.post(stranger.request("ping"))  # 401
        await asyncio.sleep(0.05)
    await asyncio.gather(*slow, return_exceptions=True)


@contextlib.asynccontextmanager
async def _under_load(running: Any, raw_client: Any) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.ensure_future(_load(running, raw_client, stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def _wait_for_scrapes(prometheus: PrometheusServer) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        result = await prometheus.query('count_over_time(up{job="mcp-gateway"}[1m])')
        if result and float(result[0]["value"][1]) >= SCRAPES_NEEDED:
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"fewer than {SCRAPES_NEEDED} scrapes in {WAIT_SECONDS}s\n{prometheus.log_text()}")


@pytest.fixture
async def prometheus_on_gateway(gateway: StartGateway, raw_client: Any, tmp_path: Path) -> AsyncIterator[
        PrometheusServer]:
    config = make_config([stdio_backend("calc", timeout_seconds=0.5)],
                         tenants={"acme": {"backends": ["*"]},
                                  "beta": {"backends": ["*"], "rate_limit": {"requests_per_second": 1, "burst": 3}}})
    running = await gateway(config)
    target = f"127.0.0.1:{running.server.port}"
    prometheus = PrometheusServer(tmp_path, scrape_config(target, [RULES]))
    await prometheus.start()
    try:
        async with _under_load(running, raw_client):
            await _wait_for_scrapes(prometheus)
            yield prometheus
    finally:
        await prometheus.stop()


async def test_every_dashboard_query_and_rule_runs_on_a_scraped_gateway(
    prometheus_on_gateway: PrometheusServer
) -> None:
    prometheus = prometheus_on_gateway
    empty = [title for title, expr in dashboard_queries() if not await prometheus.query(expr)]
    assert not empty, f"panels without data: {empty}"
    for rule in rules():
        result = await prometheus.query(rule["expr"])  # raises unless it parses and evaluates
        if "record" in rule:
            assert result, f"recording rule {rule['record']} returned no data"
    await _assert_rules_healthy(prometheus)
    for variable, metric in (("tenant", "mcpgw_requests_total"), ("backend", "mcpgw_backend_up")):
        values = await prometheus.api(f"label/{variable}/values", **{"match[]": metric})
        assert values, f"template variable {variable} has no values"
    await _assert_exemplars(prometheus)


async def _assert_rules_healthy(prometheus: PrometheusServer) -> None:
    """Prometheus loaded every rule of the file and evaluated each without an error."""
    deadline = time.monotonic() + 10
    while True:
        groups = (await prometheus.api("rules"))["groups"]
        loaded = [rule for group in groups for rule in group["rules"]]
        if len(loaded) == len(rules()) and all(rule.get("lastEvaluation", "").startswith("2") and
                                               not rule["lastEvaluation"].startswith("0001") for rule in loaded):
            break
        assert time.monotonic() < deadline, "rules were not all evaluated"
        await asyncio.sleep(0.5)
    unhealthy = [(rule["name"], rule.get("lastError")) for rule in loaded if rule["health"] != "ok"]
    assert not unhealthy, unhealthy


async def _assert_exemplars(prometheus: PrometheusServer) -> None:
    """Latency samples carry the request (and trace) id, negotiated over OpenMetrics."""
    now = time.time()
    found = await prometheus.api("query_exemplars", query="mcpgw_request_duration_seconds_bucket",
                                 start=str(now - 300), end=str(now + 5))
    labels = [exemplar["labels"] for series in found for exemplar in series["exemplars"]]
    assert labels, "no exemplars stored"
    assert all(re.fullmatch(r"[0-9a-f]{32}", item["trace_id"]) and item["request_id"] for item in labels)


def test_the_dashboard_is_importable_with_its_variables() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert {"tenant", "backend"} <= set(variables)
    assert "id" not in dashboard or dashboard["id"] is None  # an id would clash on import
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_the_dashboard_links_to_the_status_page_at_the_gateway_it_is_told_of() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["gateway_url"]["type"] == "textbox" and variables["gateway_url"]["query"].startswith("http")
    [link] = [link for link in dashboard["links"] if link["title"] == "Status page"]
    assert (link["type"], link["url"], link["targetBlank"]) == ("link", "${gateway_url}/admin/", True)
