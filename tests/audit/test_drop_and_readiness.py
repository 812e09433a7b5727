"""A sink that cannot keep up, under `policy: drop`: the call goes on, the loss is counted, readiness says so.

Redis here is a real client pointed at a port where nothing listens: every write fails, as in an
outage. The file sink beside it keeps every record: one broken sink holds up only itself.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest
from backend_fixtures import free_port
from conftest import StartGateway, make_config, make_token, sdk_client, stdio_backend
from observability.helpers import sample, samples_of, scrape

from gateway import keys

pytestmark = pytest.mark.timeout(90)

QUEUE = 10
CALLS = 40


async def test_a_dead_sink_drops_and_counts_while_the_file_keeps_every_record(gateway: StartGateway,
                                                                              tmp_path: Path) -> None:
    trail = tmp_path / "audit.jsonl"
    config = make_config([stdio_backend("calc")],
                         audit={"enabled": True, "file": str(trail), "redis": True, "policy": "drop",
                                "redis_url": f"redis://127.0.0.1:{free_port()}/0", "queue_size": QUEUE,
                                "required": True})
    running = await gateway(config)
    async with sdk_client(running.url, make_token("acme", sub="dora")) as client:
        for n in range(CALLS):
            assert not (await asyncio.wait_for(client.call_tool("calc__add", {"a": n, "b": 0}), 10)).is_error
    for _ in range(100):
        if trail.exists() and len(trail.read_text().splitlines()) == CALLS:
            break
        await asyncio.sleep(0.05)
    assert [json.loads(line)["subject"] for line in trail.read_text().splitlines()] == ["dora"] * CALLS

    redis = next(w for w in running.app[keys.AUDIT].workers if w.sink.name == "redis")
    body, _ = await scrape(running.base + "metrics")
    dropped = sample(samples_of(body), "mcpgw_audit_dropped_total", sink="redis")
    assert dropped > 0
    assert dropped + len(redis.pipe.items) + redis.holding == CALLS  # each record: dropped, queued or being tried
    assert sample(samples_of(body), "mcpgw_audit_dropped_total", sink="file") == 0

    async with aiohttp.ClientSession() as http, http.get(running.base + "readyz") as response:
        assert response.status == 503
        assert "audit: redis failing (ConnectionError)" in (await response.json())["reasons"]
