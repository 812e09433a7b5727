"""Backend up/down/stale and circuit state: gauges follow them and each change gets one log line."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import structlog
from backend_fixtures import StartBackend
from conftest import RawClient, StartGateway, http_backend_config, make_config, make_token

from gateway import keys
from observability.helpers import registry_of, sample, samples_of, scrape, value

pytestmark = pytest.mark.timeout(90)


def _changes(logs: list[dict[str, Any]], event: str) -> list[tuple[str, str | None]]:
    return [(line["state"], line.get("previous")) for line in logs if line["event"] == event]


async def test_a_dying_backend_goes_stale_then_down_then_up_again(
    http_backend: StartBackend, gateway: StartGateway
) -> None:
    notes = await http_backend("notes")
    config = make_config([http_backend_config("notes", notes.url, timeout_seconds=2)],
                         catalogue={"refresh_seconds": 3600, "max_stale_seconds": 3600})
    with structlog.testing.capture_logs() as logs:
        running = await gateway(config)
        catalogue, reg = running.app[keys.CATALOGUE], registry_of(running.app)
        assert value(reg, "mcpgw_backend_up", backend="notes") == 1
        assert value(reg, "mcpgw_catalogue_tools", backend="notes") == 6

        await notes.stop()
        await catalogue.refresh("notes")  # fails: the last tools are kept, stale
        assert value(reg, "mcpgw_backend_up", backend="notes") == 0
        assert value(reg, "mcpgw_catalogue_refresh_total", backend="notes", outcome="error") == 1
        assert value(reg, "mcpgw_catalogue_tools", backend="notes") == 6  # still served
        await catalogue.refresh("notes")  # still stale: no second line

        await notes.start()
        await catalogue.refresh("notes")
        assert value(reg, "mcpgw_backend_up", backend="notes") == 1
        assert value(reg, "mcpgw_catalogue_refresh_total", backend="notes", outcome="ok") == 2
    assert _changes(logs, "backend_state_changed") == [("up", None), ("stale", "up"), ("up", "stale")]


async def test_a_backend_never_reached_is_down_and_has_no_age(gateway: StartGateway) -> None:
    config = make_config([http_backend_config("dead", "http://127.0.0.1:9/mcp", timeout_seconds=1)])
    running = await gateway(config)
    text, _ = await scrape(running.base + "metrics")
    samples = samples_of(text)
    assert sample(samples, "mcpgw_backend_up", backend="dead") == 0
    assert sample(samples, "mcpgw_catalogue_refresh_total", backend="dead", outcome="error") == 1
    assert ("mcpgw_catalogue_age_seconds", frozenset({("backend", "dead")})) not in samples


async def test_an_opening_circuit_shows_in_the_gauge_and_in_the_call_outcomes(
    http_backend: StartBackend, gateway: StartGateway, raw_client: Any
) -> None:
    notes = await http_backend("notes")
    config = make_config([http_backend_config("notes", notes.url, retries=0,
                                              circuit={"failures": 2, "cooldown_seconds": 0.5})],
                         catalogue={"refresh_seconds": 3600})
    running = await gateway(config)
    reg = registry_of(running.app)
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    await notes.stop()
    reasons = [await _call_reason(client) for _ in range(3)]
    assert reasons == ["unavailable", "unavailable", "circuit_open"]
    assert value(reg, "mcpgw_circuit_open", backend="notes") == 1
    text, _ = await scrape(running.base + "metrics")
    assert sample(samples_of(text), "mcpgw_circuit_open", backend="notes") == 1
    assert value(reg, "mcpgw_tool_calls_total", tenant="acme", backend="notes", tool="notes__list_notes",
                 outcome="circuit_open") == 1

    await notes.start()
    await asyncio.sleep(0.6)  # the cooldown: the next call is the probe, and it succeeds
    assert await _call_reason(client) is None
    assert value(reg, "mcpgw_circuit_open", backend="notes") == 0


async def _call_reason(client: RawClient) -> str | None:
    body = await client.call("tools/call", {"name": "notes__list_notes", "arguments": {}})
    return body["error"]["data"]["reason"] if "error" in body else None
