"""examples/team-stdio.yaml does what its header says: three npm MCP servers started by the
gateway as stdio children, served to the team under their namespaces, `move_file` denied, the
memory server keeping its graph in the shared folder.

The servers are installed once, pinned, into `.examples-npm/` (git-ignored), and each child runs
there (its `cwd`, overridden through MCPGW_ variables), so `npx` finds them without fetching.
Without npm this skips, unless MCPGW_REQUIRE_CONFORMANCE=1 (set by `.ci/run`, which installs npm)
makes that a failure, as for the conformance suite.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import StartGateway
from npm_packages import ensure, unavailable

from gateway.config import load_config

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "team-stdio.yaml"
INSTALL_DIR = ROOT / ".examples-npm"
SERVERS = {"filesystem": "@modelcontextprotocol/server-filesystem", "memory": "@modelcontextprotocol/server-memory",
           "thinking": "@modelcontextprotocol/server-sequential-thinking"}
VERSION = "2026.8.31"
REQUIRE_ENV = "MCPGW_REQUIRE_CONFORMANCE"


def _installed() -> bool:
    return all((INSTALL_DIR / "node_modules" / package / "package.json").exists() for package in SERVERS.values())


@pytest.fixture(scope="module")
def servers() -> Path:
    """The folder the three servers are installed in, installing them first if needed."""
    ensure(INSTALL_DIR, [f"{p}@{VERSION}" for p in SERVERS.values()], installed=_installed,
           what="the example's three servers", require_env=REQUIRE_ENV)
    if shutil.which("npx") is None:
        unavailable("npx is missing", REQUIRE_ENV)
    return INSTALL_DIR


async def test_the_team_gets_the_three_servers(servers: Path, gateway: StartGateway, raw_client: Any,
                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "team-key-for-the-example-test"
    (tmp_path / "plan.md").write_text("ship it\n", encoding="utf-8")
    monkeypatch.setenv("TEAM_KEY_SHA256", hashlib.sha256(key.encode()).hexdigest())
    monkeypatch.setenv("TEAM_SHARE", str(tmp_path))
    for name in SERVERS:
        monkeypatch.setenv(f"MCPGW_BACKENDS__{name}__CWD", str(servers))
    team = raw_client((await gateway(load_config(EXAMPLE))).url, key)
    await team.initialize()

    names = {tool["name"] for tool in (await team.call("tools/list"))["result"]["tools"]}
    assert {"filesystem__list_directory", "memory__create_entities", "thinking__sequentialthinking"} <= names
    assert "filesystem__move_file" not in names  # the example's deny
    assert all(name.split("__")[0] in SERVERS for name in names)

    listed = await team.call("tools/call", {"name": "filesystem__list_directory", "arguments": {"path": str(tmp_path)}})
    assert "plan.md" in listed["result"]["content"][0]["text"]
    created = await team.call("tools/call", {"name": "memory__create_entities", "arguments": {"entities": [
        {"name": "release", "entityType": "plan", "observations": ["ship it"]}]}})
    assert created["result"].get("isError") is not True, created
    assert "release" in (tmp_path / ".memory.json").read_text(encoding="utf-8")  # the env the example gives it
