"""Admin actions are audited: who asked for a reload or a catalogue refresh, and how it ended."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest
from conftest import API_KEY, StartGateway, make_config, stdio_backend

pytestmark = pytest.mark.timeout(60)


async def test_a_reload_and_a_refresh_each_leave_a_record_naming_the_admin(gateway: StartGateway,
                                                                           tmp_path: Path) -> None:
    trail = tmp_path / "audit.jsonl"
    running = await gateway(make_config([stdio_backend("calc")], audit={"enabled": True, "file": str(trail)}))
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with aiohttp.ClientSession() as http:
        async with http.post(running.base + "admin/catalogue/refresh", headers=headers) as response:
            assert response.status == 200
            refresh_id = response.headers["X-Request-Id"]
        async with http.post(running.base + "admin/reload", headers=headers) as response:
            assert response.status == 409  # this app was not started from a file it can read again
        async with http.post(running.base + "admin/reload") as response:
            assert response.status == 401  # refused before it was an admin action: nothing to record
    for _ in range(100):
        if trail.exists() and len(trail.read_text().splitlines()) >= 2:
            break
        await asyncio.sleep(0.05)
    refresh, reload = [json.loads(line) for line in trail.read_text().splitlines()]
    assert (refresh["kind"], refresh["method"], refresh["outcome"]) == ("admin", "admin/catalogue/refresh", "ok")
    assert (refresh["tenant"], refresh["subject"], refresh["request_id"]) == ("acme", "ci-bot", refresh_id)
    assert (reload["method"], reload["outcome"], reload["subject"]) == ("admin/reload", "rejected", "ci-bot")
    assert reload["detail"]["trigger"] == "admin" and [r["seq"] for r in (refresh, reload)] == [0, 1]
