"""`mcp-gateway pins`: export a lockfile, a gateway holding what differs from it, and diff/approve from a shell."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from conftest import JWT_SECRET, RawClient, StartGateway, make_token

from gateway.catalogue.lockfile import read_lockfile
from gateway.config import parse_config

pytestmark = pytest.mark.timeout(90)

SCRIPT = Path(__file__).parents[1] / "e2e" / "rewriting_backend.py"
REPO = Path(__file__).parents[2]


def _raw(backends: list[dict[str, Any]], **sections: Any) -> dict[str, Any]:
    return {"auth": {"jwt": {"secret": JWT_SECRET}}, "backends": backends,
            "tenants": {"acme": {"backends": ["*"]}}, **sections}


def _stdio(**integrity: str) -> dict[str, Any]:
    return {"name": "gh", "transport": "stdio", "command": [sys.executable, str(SCRIPT)], "integrity": integrity}


async def _tools(client: RawClient) -> dict[str, Any]:
    return {tool["name"]: tool for tool in (await client.call("tools/list"))["result"]["tools"]}


def test_export_without_redis_writes_what_the_backends_list_now(tmp_path: Path) -> None:
    config, lock = tmp_path / "gateway.yaml", tmp_path / "pins.lock.json"
    config.write_text(yaml.safe_dump(_raw([_stdio()], integrity={"lockfile": str(lock)})))
    assert _cli("export", "--config", str(config)).returncode == 0
    approved = read_lockfile(str(lock))["gh"]
    assert approved[("tools", "create_issue")].definition["description"] == "Create an issue in the tracker."
    assert '"tools/create_issue"' in lock.read_text()  # reviewable: one item per key, indented


def test_pins_diff_without_a_shared_store_says_what_to_do(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(_raw([_stdio()])))
    done = _cli("diff", "--config", str(config))
    assert done.returncode == 1
    assert "store.redis_url" in done.stderr and "Traceback" not in done.stderr


def test_a_broken_lockfile_is_named_without_a_traceback(tmp_path: Path) -> None:
    config, lock = tmp_path / "gateway.yaml", tmp_path / "pins.lock.json"
    lock.write_text('{"version": 1, "backends": {"gh": {"create_issue": {}}}}')
    config.write_text(yaml.safe_dump(_raw([_stdio()], integrity={"lockfile": str(lock)})))
    for command in (["pins", "export"], ["check-config"]):
        done = subprocess.run([sys.executable, "-m", "gateway", *command, "--config", str(config)], cwd=REPO,
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 1
        assert str(lock) in done.stderr and "KIND/NAME" in done.stderr and "Traceback" not in done.stderr


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", "pins", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=False)


async def test_a_definition_other_than_the_lockfile_s_is_held_from_the_start(
        tmp_path: Path, gateway: StartGateway, raw_client: Any) -> None:
    lock = tmp_path / "pins.lock.json"
    reviewed = {"name": "create_issue", "description": "The description the team reviewed.",
                "inputSchema": {"type": "object"}}
    lock.write_bytes(orjson.dumps({"version": 1, "backends": {"gh": {"tools/create_issue": {
        "fingerprint": "not trusted: computed again", "definition": reviewed}}}}))
    running = await gateway(parse_config(_raw([_stdio(mode="hold")], integrity={"lockfile": str(lock)}), {}))
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    tools = await _tools(client)
    assert "gh__create_issue" not in tools and "gh__rewrite" in tools  # new items: allowed by default
    error = (await client.call("tools/call", {"name": "gh__create_issue", "arguments": {"title": "x"}}))["error"]
    assert "held for review" in error["message"]
