"""The status page's JSON over HTTP, against a real gateway with real stdio backends.

Issue 31, item 2: per backend its era, live state and traffic over the last minutes (from the
gateway's own counters, equal to what /metrics says); per tenant what it holds against its
limits; what a tenant sees; the reload history; the replicas; all for admin tokens only.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp.test_utils import TestServer
from conftest import (
    API_KEY,
    JWT_SECRET,
    READY_TIMEOUT,
    SCRAPE_TOKEN,
    sdk_client,
    stdio_backend,
)
from observability.helpers import sample, samples_of, scrape

from gateway import keys
from gateway.app import create_app
from gateway.config import load_config

pytestmark = pytest.mark.timeout(90)

ADMIN = {"Authorization": f"Bearer {API_KEY}"}
GLOBEX_KEY = "status-globex-key"
GLOBEX = {"Authorization": f"Bearer {GLOBEX_KEY}"}
ENDPOINTS = ["/admin/status", "/admin/backends", "/admin/tenants", "/admin/catalogue?tenant=acme", "/admin/reloads",
             "/admin/replicas"]


def raw_config(calc_timeout: float = 30.0) -> dict[str, Any]:
    """acme (admin key) sees calc and clock; globex sees calc only, at a rate it soon exceeds."""
    keys_ = [{"sha256": hashlib.sha256(API_KEY.encode()).hexdigest(), "tenant": "acme", "subject": "ci-bot",
              "scopes": ["mcpgw:admin"]},
             {"sha256": hashlib.sha256(GLOBEX_KEY.encode()).hexdigest(), "tenant": "globex", "subject": "bot"}]
    return {"auth": {"jwt": {"secret": JWT_SECRET}, "api_keys": keys_},
            "backends": [{**stdio_backend("calc"), "timeout_seconds": calc_timeout}, stdio_backend("clock")],
            "tenants": {"acme": {"backends": ["*"], "limits": {"sessions": 5, "streams": 3, "in_flight": 7},
                                 "rules": [{"name": "ops-convert", "effect": "allow", "callers": {"groups": ["ops"]},
                                            "tools": ["clock__convert"]},
                                           {"name": "no-convert", "effect": "deny", "tools": ["clock__convert"]}]},
                        "globex": {"backends": ["calc"], "rate_limit": {"requests_per_second": 0.01, "burst": 2}}},
            "metrics": {"token": SCRAPE_TOKEN}}


class Running:
    def __init__(self, server: TestServer, path: Path) -> None:
        self.server, self.path = server, path
        self.base = str(server.make_url("")).rstrip("/")

    async def get(self, path: str, headers: dict[str, str] | None = ADMIN) -> tuple[int, Any, Any]:
        async with aiohttp.ClientSession() as http, http.get(self.base + path, headers=headers or {}) as resp:
            body = await resp.json() if resp.content_type == "application/json" else await resp.text()
            return resp.status, body, resp.headers

    async def post(self, path: str) -> tuple[int, Any]:
        async with aiohttp.ClientSession() as http, http.post(self.base + path, headers=ADMIN) as resp:
            return resp.status, await resp.json()


@pytest.fixture
async def running(aiohttp_server: Any, tmp_path: Path) -> AsyncIterator[Running]:
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(raw_config()))
    app = create_app(load_config(path, {}), reload_source=lambda: load_config(path, {}))
    server = await aiohttp_server(app)
    await asyncio.wait_for(app[keys.CATALOGUE].ready.wait(), READY_TIMEOUT)
    yield Running(server, path)


async def test_each_endpoint_is_for_admin_tokens_only_and_never_cached(running: Running) -> None:
    for path in ENDPOINTS:
        status, _, headers = await running.get(path, headers=None)
        assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer"), path
        status, body, _ = await running.get(path, headers=GLOBEX)
        assert status == 403 and "scope" in body["error"]["message"], path
        status, body, headers = await running.get(path)
        assert status == 200, (path, body)
        assert headers["Cache-Control"] == "no-store"
    status, _, _ = await running.get(f"/admin/status?token={API_KEY}", headers=None)
    assert status == 401  # never from the query string


async def test_backend_traffic_is_what_the_metrics_count(running: Running) -> None:
    async with sdk_client(f"{running.base}/mcp", API_KEY) as client:
        for n in range(6):
            assert not (await client.call_tool("calc__add", {"a": n, "b": 1})).is_error
        assert (await client.call_tool("calc__evaluate", {"expression": "1/0"})).is_error
        await client.call_tool("clock__now", {"timezone": "UTC"})
    status, body, _ = await running.get("/admin/backends?window=60")
    assert status == 200, body
    rows = {row["name"]: row for row in body["backends"]}
    calc, clock = rows["calc"], rows["clock"]
    assert (calc["state"], calc["era"], calc["protocol_version"]) == ("up", "handshake", "2025-11-25")
    assert isinstance(calc["pid"], int) and calc["tools"] == 5
    traffic = calc["traffic"]
    assert (traffic["window_seconds"], traffic["calls"], traffic["tool_errors"], traffic["failed"]) == (60, 7, 1, 0)
    assert traffic["error_rate"] == 0 and 0 < traffic["p50_ms"] <= traffic["p95_ms"]
    assert traffic["calls_per_second"] == pytest.approx(7 / traffic["covered_seconds"], rel=0.01)
    assert clock["traffic"]["calls"] == 1

    text, _ = await scrape(f"{running.base}/metrics")
    samples = samples_of(text)
    for name, row in rows.items():
        counted = sum(value for (metric, labels), value in samples.items()
                      if metric == "mcpgw_tool_calls_total" and ("backend", name) in labels)
        assert row["traffic"]["totals"]["calls"] == counted
        assert row["traffic"]["totals"]["restarts"] == sample(samples, "mcpgw_backend_restarts_total", backend=name)
    tool_errors = sum(value for (metric, labels), value in samples.items() if metric == "mcpgw_tool_calls_total"
                      and ("backend", "calc") in labels and ("outcome", "tool_error") in labels)
    assert traffic["totals"]["tool_errors"] == tool_errors == 1


async def test_tenants_show_what_they_hold_against_their_limits(running: Running, raw_client: Any) -> None:
    first, second = raw_client(f"{running.base}/mcp", API_KEY), raw_client(f"{running.base}/mcp", API_KEY)
    await first.initialize()
    await second.initialize()
    async with aiohttp.ClientSession() as http:
        stream = await http.get(f"{running.base}/mcp", headers={**first.headers(), "Accept": "text/event-stream"})
        slow = asyncio.ensure_future(second.call("tools/call", {"name": "calc__slow", "arguments": {"seconds": 3}}))
        try:
            acme = await _tenant_when(running, "acme", lambda row: row["in_flight"] == 1)
        finally:
            stream.close()
            await slow
    assert (acme["sessions"], acme["get_streams"], acme["listen_streams"]) == (2, 1, 0)
    assert acme["limits"] == {"sessions": 5, "streams": 3, "in_flight": 7, "batch_size": 100}
    assert acme["rate_limit"] is None and acme["backends"] == ["*"]


async def test_rate_limited_requests_are_counted_per_tenant_as_in_the_metrics(running: Running,
                                                                             raw_client: Any) -> None:
    globex = raw_client(f"{running.base}/mcp", GLOBEX_KEY)
    statuses = [(await globex.post(globex.request("ping")))[0] for _ in range(5)]
    assert statuses.count(429) == 3  # a burst of 2, then nothing for 100 s
    status, body, _ = await running.get("/admin/tenants")
    assert status == 200, body
    rows = {row["name"]: row for row in body["tenants"]}
    traffic = rows["globex"]["traffic"]
    assert (traffic["requests"], traffic["rate_limited"], traffic["totals"]["rate_limited"]) == (5, 3, 3)
    assert rows["globex"]["rate_limit"] == {"requests_per_second": 0.01, "burst": 2}
    text, _ = await scrape(f"{running.base}/metrics")
    assert sample(samples_of(text), "mcpgw_rate_limited_total", tenant="globex") == 3
    assert rows["acme"]["traffic"]["rate_limited"] == 0


async def _tenant_when(running: Running, name: str, ready: Any, seconds: float = 10.0) -> dict[str, Any]:
    """The tenant's row once `ready(row)` holds (what it holds changes as requests come and go)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        _, body, _ = await running.get("/admin/tenants")
        row = next(row for row in body["tenants"] if row["name"] == name)
        if ready(row) or asyncio.get_running_loop().time() > deadline:
            return row
        await asyncio.sleep(0.05)


async def test_the_catalogue_browser_shows_what_one_tenant_sees(running: Running) -> None:
    status, body, _ = await running.get("/admin/catalogue?tenant=globex")
    assert status == 200, body
    assert body["tenant"] == "globex" and {item["backend"] for item in body["items"]} == {"calc"}
    assert body["total"] == len(body["items"]) == 7  # 5 tools, a prompt, a template
    add = next(item for item in body["items"] if item["name"] == "calc__add")
    assert add == {"kind": "tools", "name": "calc__add", "backend": "calc", "original": "add", "title": None,
                   "description": "Return a + b."}
    _, found, _ = await running.get("/admin/catalogue?tenant=acme&q=List_TimeZ")
    assert [item["name"] for item in found["items"]] == ["clock__list_timezones"]
    _, described, _ = await running.get("/admin/catalogue?tenant=globex&q=return%20a%20%2B")
    assert [item["name"] for item in described["items"]] == ["calc__add"]  # in its description only
    _, templates, _ = await running.get("/admin/catalogue?tenant=acme&kind=templates")
    assert [(item["name"], item["original"]) for item in templates["items"]] == [
        ("calc+calc://squares/{count}", "calc://squares/{count}")]
    _, first, _ = await running.get("/admin/catalogue?tenant=acme&limit=2")
    assert (first["total"], len(first["items"])) == (12, 2)  # 8 tools, 2 prompts, a resource, a template
    assert first["caller"] is None and "rule" not in first["items"][0]  # the tenant's view: its globs alone


async def test_the_catalogue_browser_shows_what_one_caller_sees_under_the_rules(running: Running) -> None:
    _, alice, _ = await running.get("/admin/catalogue?tenant=acme&kind=tools&subject=alice")
    assert alice["caller"] == {"subject": "alice", "groups": [], "scopes": [], "claims": {}}
    assert "clock__convert" not in {item["name"] for item in alice["items"]} and alice["total"] == 7
    assert {item["rule"] for item in alice["items"]} == {"default"}
    _, ops, _ = await running.get("/admin/catalogue?tenant=acme&kind=tools&subject=bob&groups=dev,ops")
    convert = next(item for item in ops["items"] if item["name"] == "clock__convert")
    assert (convert["rule"], convert["conditional"], ops["total"]) == ("ops-convert", False, 8)
    assert ops["caller"]["groups"] == ["dev", "ops"]
    status, body, _ = await running.get("/admin/catalogue?tenant=acme&claims=%5B1%5D")
    assert status == 400 and "claims must be a JSON object" in body["error"]["message"]


BAD_CATALOGUE_QUERIES = [
    ("", 404, "name a tenant"), ("?tenant=ghost", 404, "no such tenant"),
    ("?tenant=acme&kind=widgets", 400, "kind must be"), ("?tenant=acme&limit=0", 400, "limit must be"),
    ("?tenant=acme&limit=x", 400, "limit must be"), (f"?tenant=acme&q={'a' * 201}", 400, "q is longer"),
]


async def test_bad_queries_are_refused_plainly(running: Running) -> None:
    for query, status, message in BAD_CATALOGUE_QUERIES:
        got, body, _ = await running.get(f"/admin/catalogue{query}")
        assert got == status and message in body["error"]["message"], query
    for window in ("1", "901", "nan", "inf", "-5", "five"):  # outside what the traffic window keeps
        for path in ("/admin/backends", "/admin/tenants"):
            status, body, _ = await running.get(f"{path}?window={window}")
            assert status == 400 and "window must be" in body["error"]["message"], window


async def test_reloads_are_listed_with_who_what_changed_and_refusals(running: Running) -> None:
    _, before, _ = await running.get("/admin/reloads")
    assert [(e["trigger"], e["status"]) for e in before["reloads"]] == [("start", "applied")]
    started = before["config_version"]

    running.path.write_text(yaml.safe_dump(raw_config(calc_timeout=12.0)))
    status, outcome = await running.post("/admin/reload")
    assert status == 200 and outcome["changed"] == ["backends.calc.timeout_seconds"], outcome
    running.path.write_text("backends: [unclosed")
    status, _ = await running.post("/admin/reload")
    assert status == 422

    _, after, _ = await running.get("/admin/reloads")
    rejected, applied, start = after["reloads"]
    assert (rejected["status"], rejected["trigger"], rejected["by"]) == ("rejected", "admin",
                                                                        {"tenant": "acme", "subject": "ci-bot"})
    assert "not valid YAML" in rejected["reason"]
    assert rejected["config_version"]["before"] == rejected["config_version"]["after"] == outcome["config_version"]
    assert applied["backends"] == {"added": [], "removed": [], "replaced": ["calc"]}
    assert applied["config_version"] == {"before": started, "after": outcome["config_version"]} and started != \
        outcome["config_version"]
    assert start["trigger"] == "start" and start["at"] < applied["at"] < rejected["at"]
    assert {e["replica"] for e in after["reloads"]} == {after["replica"]}
    _, status_body, _ = await running.get("/admin/status")
    assert status_body["gateway"]["config_version"] == after["config_version"] == outcome["config_version"]


async def test_status_and_replicas_describe_this_replica(running: Running, raw_client: Any) -> None:
    await raw_client(f"{running.base}/mcp", API_KEY).initialize()
    _, status, _ = await running.get("/admin/status")
    gateway = status["gateway"]
    assert gateway["ready"] is True and gateway["not_ready"] == [] and gateway["sessions"] == 1
    assert status["store"] == {"kind": "memory", "up": True}
    assert status["backends"] == {"up": 2, "degraded": 0, "down": 0, "pending": 0} and status["tenants"] == 2
    assert status["window"] == {"sample_seconds": 10.0, "history_seconds": 900.0}
    _, replicas, _ = await running.get("/admin/replicas")
    assert (replicas["store"], replicas["store_answered"], replicas["config_versions"]) == ("memory", True, 1)
    [own] = replicas["replicas"]
    assert own["self"] is True and own["replica"] == gateway["replica"]
    assert own["config_version"] == gateway["config_version"] and own["pid"] == gateway["pid"]

