"""Policy rules reload live: a rule change moves a live session's view, and only the sessions whose
view changed hear `list_changed` (two callers of one tenant, in two groups, on the real process)."""

from __future__ import annotations

import asyncio
import hashlib
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from lifecycle.processes import HOST
from lifecycle.test_reload import ADMIN_KEY, METRICS_TOKEN, Client, admin_reload, calc, http, key, serve

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")]
__all__ = ["http"]  # the fixture, used by name

ALICE, BOB = "policy-alice-key", "policy-bob-key"
QUIET = 1.0
"""How long a session that should hear nothing is watched after the other one heard."""


def member(secret: str, group: str) -> dict[str, Any]:
    return {"sha256": hashlib.sha256(secret.encode()).hexdigest(), "tenant": "acme", "subject": secret,
            "groups": [group]}


def write(path: Path, support_tools: list[str]) -> Path:
    rules = [{"name": "leads", "effect": "allow", "callers": {"groups": ["leads"]}, "tools": ["calc__*"]},
             {"name": "support", "effect": "allow", "callers": {"groups": ["support"]}, "tools": support_tools}]
    raw = {"server": {"host": HOST},
           "auth": {"api_keys": [member(ALICE, "support"), member(BOB, "leads"),
                                 key(ADMIN_KEY, "ops", ("mcpgw:admin",))]},
           "backends": [calc("calc")],
           "tenants": {"acme": {"backends": ["*"], "default": "deny", "rules": rules}, "ops": {"backends": []}},
           "metrics": {"token": METRICS_TOKEN}, "logging": {"level": "info", "format": "json"}}
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


async def quiet(client: Client) -> list[dict[str, Any]]:
    await asyncio.sleep(QUIET)
    heard = []
    while not client.notifications.empty():
        heard.append(client.notifications.get_nowait())
    return heard


@pytest.mark.parametrize("trigger", ["sighup", "admin"])
async def test_a_rule_change_moves_the_view_of_only_the_callers_it_concerns(
        start_gateway: Any, tmp_path: Path, http: aiohttp.ClientSession, trigger: str) -> None:
    config = write(tmp_path / "gateway.yaml", ["calc__add"])
    gateway = await serve(start_gateway, config)
    alice = await Client(http, gateway.url(), ALICE).open()
    bob = await Client(http, gateway.url(), BOB).open()
    assert await alice.tools() == {"calc__add"}
    everything = await bob.tools()
    assert {"calc__add", "calc__multiply"} <= everything

    write(config, ["calc__multiply"])
    if trigger == "sighup":
        gateway.signal(signal.SIGHUP)
    else:
        status, outcome = await admin_reload(http, gateway)
        assert (status, outcome["tenants_changed"]) == (200, ["acme"])
    await alice.notified("notifications/tools/list_changed")
    assert await alice.tools() == {"calc__multiply"}
    assert "Unknown tool" in (await alice.call("calc__add", a=1, b=2))["error"]["message"]
    assert (await alice.call("calc__multiply", a=2, b=3))["result"]["content"][0]["text"] == "6.0"
    assert [n for n in await quiet(bob) if n.get("method", "").endswith("list_changed")] == []
    assert await bob.tools() == everything
    await alice.close()
    await bob.close()
