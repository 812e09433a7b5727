"""Known traffic through a real gateway moves every counter and histogram by exactly what it should."""

from __future__ import annotations

from typing import Any

import pytest
from backend_fixtures import StartBackend
from conftest import RawClient, StartGateway, http_backend_config, make_config, make_token, stdio_backend

from gateway import keys
from observability.helpers import registry_of, sample, samples_of, scrape, value

pytestmark = pytest.mark.timeout(90)

TENANTS = {"acme": {"backends": ["*"]},
           "beta": {"backends": ["*"], "rate_limit": {"requests_per_second": 0.01, "burst": 4}}}


async def _traffic(running: Any, raw_client: Any) -> None:
    """acme: successes, a tool error, a timeout, an unknown tool; beta: rate limited; strangers: 401."""
    acme: RawClient = raw_client(running.url, make_token("acme"))
    await acme.initialize()  # initialize + notifications/initialized
    for _ in range(2):
        await acme.call("tools/list")
    for i in range(3):
        assert "result" in await acme.call("tools/call", {"name": "calc__add", "arguments": {"a": i, "b": 1}})
    assert "result" in await acme.call("tools/call", {"name": "notes__list_notes", "arguments": {}})
    failed = await acme.call("tools/call", {"name": "calc__evaluate", "arguments": {"expression": "2**1000"}})
    assert failed["result"]["isError"] is True
    slow = await acme.call("tools/call", {"name": "calc__slow", "arguments": {"seconds": 5, "steps": 1}})
    assert slow["error"]["data"]["reason"] == "timeout"
    unknown = await acme.call("tools/call", {"name": "calc__nope", "arguments": {}})
    assert unknown["error"]["code"] == -32602

    beta: RawClient = raw_client(running.url, make_token("beta"))
    await beta.initialize()  # 2 of the burst of 4
    await beta.call("tools/list")
    await beta.call("tools/list")
    for _ in range(2):
        status, _, headers = await beta.post(beta.request("tools/list"))
        assert status == 429 and "Retry-After" in headers

    anonymous: RawClient = raw_client(running.url, None)
    expired: RawClient = raw_client(running.url, make_token("acme", ttl=-3600))
    for client in (anonymous, anonymous, expired):
        status, _, _ = await client.post(client.request("ping"))
        assert status == 401


async def test_known_traffic_moves_each_metric_by_exactly_its_share(
    http_backend: StartBackend, gateway: StartGateway, raw_client: Any
) -> None:
    notes = await http_backend("notes")
    config = make_config([stdio_backend("calc", timeout_seconds=1), http_backend_config("notes", notes.url)],
                         tenants=TENANTS, catalogue={"refresh_seconds": 3600})
    running = await gateway(config)
    await _traffic(running, raw_client)
    reg = registry_of(running.app)

    def requests(method: str, tenant: str, outcome: str) -> float:
        return value(reg, "mcpgw_requests_total", method=method, tenant=tenant, outcome=outcome)

    assert requests("initialize", "acme", "ok") == 1
    assert requests("notifications/initialized", "acme", "ok") == 1
    assert requests("tools/list", "acme", "ok") == 2
    assert requests("tools/call", "acme", "ok") == 4
    assert requests("tools/call", "acme", "tool_error") == 1
    assert requests("tools/call", "acme", "timeout") == 1
    assert requests("tools/call", "acme", "invalid_params") == 1
    assert requests("tools/list", "beta", "ok") == 2
    assert requests("none", "beta", "rate_limited") == 2
    assert requests("none", "other", "unauthorized") == 3
    assert value(reg, "mcpgw_request_duration_seconds_count", method="tools/call", tenant="acme") == 7
    assert value(reg, "mcpgw_request_duration_seconds_count", method="tools/list", tenant="beta") == 2

    def tool_calls(backend: str, tool: str, outcome: str) -> float:
        return value(reg, "mcpgw_tool_calls_total", tenant="acme", backend=backend, tool=tool, outcome=outcome)

    assert tool_calls("calc", "calc__add", "ok") == 3
    assert tool_calls("notes", "notes__list_notes", "ok") == 1
    assert tool_calls("calc", "calc__evaluate", "tool_error") == 1
    assert tool_calls("calc", "calc__slow", "timeout") == 1
    assert value(reg, "mcpgw_tool_call_duration_seconds_count", backend="calc", tool="calc__add") == 3
    assert value(reg, "mcpgw_tool_call_duration_seconds_count", backend="calc", tool="calc__slow") == 1
    # the timed-out call sits in the 1 s..2.5 s buckets: it waited for the backend's 1 s budget
    assert value(reg, "mcpgw_tool_call_duration_seconds_bucket", backend="calc", tool="calc__slow", le="0.5") == 0
    assert value(reg, "mcpgw_upstream_request_duration_seconds_count", backend="calc", method="tools/call") == 5
    assert value(reg, "mcpgw_upstream_request_duration_seconds_count", backend="notes", method="tools/call") == 1
    assert value(reg, "mcpgw_upstream_request_duration_seconds_count", backend="notes", method="tools/list") >= 1

    assert value(reg, "mcpgw_rate_limited_total", tenant="beta") == 2
    assert value(reg, "mcpgw_rate_limited_total", tenant="acme") == 0
    assert value(reg, "mcpgw_auth_failures_total", reason="missing") == 2
    assert value(reg, "mcpgw_auth_failures_total", reason="expired") == 1
    # tenant views: acme looked its view up 10 times (initialize, 2 lists, 7 calls), beta 3 times; one miss each
    assert value(reg, "mcpgw_catalogue_cache_total", result="miss") == 2
    assert value(reg, "mcpgw_catalogue_cache_total", result="hit") == 11
    assert value(reg, "mcpgw_catalogue_refresh_total", backend="calc", outcome="ok") == 1
    assert value(reg, "mcpgw_catalogue_refresh_total", backend="notes", outcome="ok") == 1
    assert value(reg, "mcpgw_inflight_requests") == 0


async def test_prompts_resources_and_completions_are_counted_by_method_and_timed_per_backend(
    gateway: StartGateway, raw_client: Any
) -> None:
    config = make_config([stdio_backend("calc"), stdio_backend("clock")], catalogue={"refresh_seconds": 3600})
    running = await gateway(config)
    acme: RawClient = raw_client(running.url, make_token("acme"))
    await acme.initialize()
    await acme.call("prompts/list")
    await acme.call("resources/templates/list")
    assert "result" in await acme.call("prompts/get", {"name": "calc__explain", "arguments": {"expression": "1"}})
    assert "result" in await acme.call("resources/read", {"uri": "calc+calc://squares/2"})
    assert "result" in await acme.call("resources/read", {"uri": "clock+clock://zones"})
    assert "error" in await acme.call("resources/read", {"uri": "calc+calc://squares/0"})  # the backend's error
    assert "error" in await acme.call("resources/read", {"uri": "nobody+x://1"})
    done = await acme.call("completion/complete", {"ref": {"type": "ref/prompt", "name": "clock__plan_meeting"},
                                                   "argument": {"name": "zones", "value": "Eur"}})
    assert done["result"]["completion"]["values"]
    reg = registry_of(running.app)

    def requests(method: str, outcome: str) -> float:
        return value(reg, "mcpgw_requests_total", method=method, tenant="acme", outcome=outcome)

    def upstream(backend: str, method: str) -> float:
        return value(reg, "mcpgw_upstream_request_duration_seconds_count", backend=backend, method=method)

    assert requests("prompts/list", "ok") == requests("resources/templates/list", "ok") == 1
    assert requests("prompts/get", "ok") == requests("completion/complete", "ok") == 1
    assert requests("resources/read", "ok") == 2
    assert requests("resources/read", "backend_error") == 1
    assert requests("resources/read", "not_found") == 1
    assert upstream("calc", "prompts/get") == 1
    assert upstream("calc", "resources/read") == 2 and upstream("clock", "resources/read") == 1
    assert upstream("clock", "completion/complete") == 1
    for backend in ("calc", "clock"):  # the refresher's lists are timed too
        assert upstream(backend, "prompts/list") == upstream(backend, "resources/list") == 1
        assert upstream(backend, "resources/templates/list") == 1


async def test_a_scrape_shows_the_same_numbers_and_the_live_gauges(
    gateway: StartGateway, raw_client: Any
) -> None:
    running = await gateway(make_config([stdio_backend("calc")], catalogue={"refresh_seconds": 3600}))
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    await client.call("tools/call", {"name": "calc__add", "arguments": {"a": 1, "b": 1}})

    text, content_type = await scrape(running.base + "metrics")
    assert content_type.startswith("text/plain")
    samples = samples_of(text)
    assert sample(samples, "mcpgw_tool_calls_total", tenant="acme", backend="calc", tool="calc__add",
                  outcome="ok") == 1
    assert sample(samples, "mcpgw_backend_up", backend="calc") == 1
    assert sample(samples, "mcpgw_circuit_open", backend="calc") == 0
    assert sample(samples, "mcpgw_catalogue_tools", backend="calc") == 5
    assert 0 <= sample(samples, "mcpgw_catalogue_age_seconds", backend="calc") < 30
    assert sample(samples, "mcpgw_sessions_active") == 1
    assert sample(samples, "mcpgw_ready") == 1
    assert sample(samples, "mcpgw_inflight_requests") == 0


async def test_labels_stay_bounded_for_unknown_tenants_methods_and_tools(
    gateway: StartGateway, raw_client: Any
) -> None:
    running = await gateway(make_config([stdio_backend("calc")], tenants={"acme": {"backends": ["*"]}}))
    stranger: RawClient = raw_client(running.url, make_token("nobody-configured"))
    status, _, _ = await stranger.post(stranger.request("ping"))
    assert status == 403
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    for method in ("made/up-1", "made/up-2"):
        assert (await client.call(method))["error"]["code"] == -32601
    reg = registry_of(running.app)
    assert value(reg, "mcpgw_requests_total", method="none", tenant="other", outcome="forbidden") == 1
    assert value(reg, "mcpgw_requests_total", method="other", tenant="acme", outcome="method_not_found") == 2
    metrics = running.app[keys.METRICS]
    assert metrics.tool_label("calc__add") == "calc__add"  # a dict lookup on the catalogue, not a scan
    assert metrics.tool_label("calc__gone") == "other"


async def test_each_call_of_a_batch_is_counted_with_its_own_tool_and_outcome(
    gateway: StartGateway, raw_client: Any
) -> None:
    running = await gateway(make_config([stdio_backend("calc")], catalogue={"refresh_seconds": 3600}))
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize("2025-03-26")  # the last revision with batches
    batch = [client.request("tools/call", {"name": "calc__add", "arguments": {"a": 1, "b": 1}}),
             client.request("tools/call", {"name": "calc__evaluate", "arguments": {"expression": "2**1000"}})]
    status, replies, _ = await client.post(batch)
    assert status == 200 and len(replies) == 2
    reg = registry_of(running.app)
    for tool, outcome in (("calc__add", "ok"), ("calc__evaluate", "tool_error")):
        assert value(reg, "mcpgw_tool_calls_total", tenant="acme", backend="calc", tool=tool, outcome=outcome) == 1
    assert value(reg, "mcpgw_requests_total", method="batch", tenant="acme", outcome="tool_error") == 1
