"""MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`, `--cli`), as a developer runs it against the
gateway: over HTTP with a bearer token, or starting `mcp-gateway stdio` itself.

Inspector and Node 22 (it needs >= 22.19) are installed once, pinned, into `.inspector/` at the
repository root (git-ignored), as tests/conformance installs its suite. Without npm the tests that use
the `inspector` fixture skip, unless MCPGW_REQUIRE_CONFORMANCE=1 (set by `.ci/run`, which installs npm)
makes that a failure. A test module uses it with `from inspector_cli import inspector` (the fixture).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from npm_packages import ensure

ROOT = Path(__file__).resolve().parents[1]
INSTALL_DIR = ROOT / ".inspector"
INSPECTOR_VERSION = "2.12.0"
NODE_VERSION = "22.23.3"
REQUIRE_ENV = "MCPGW_REQUIRE_CONFORMANCE"
BIN = INSTALL_DIR / "node_modules" / ".bin"
INSTALL_TIMEOUT = 540
RUN_TIMEOUT = 60.0


def _installed() -> bool:
    package = INSTALL_DIR / "node_modules" / "@modelcontextprotocol" / "inspector" / "package.json"
    try:
        return json.loads(package.read_text())["version"] == INSPECTOR_VERSION and (BIN / "node").exists()
    except (OSError, ValueError, KeyError):
        return False


@pytest.fixture(scope="module")
def inspector() -> Path:
    """The `mcp-inspector` command, installed first if needed."""
    ensure(INSTALL_DIR, [f"node@{NODE_VERSION}", f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}"],
           installed=_installed, what=f"MCP Inspector {INSPECTOR_VERSION}", require_env=REQUIRE_ENV,
           timeout=INSTALL_TIMEOUT)
    return BIN / "mcp-inspector"


async def run(inspector: Path, home: Path, target: list[str], *args: str,
              env: Mapping[str, str] | None = None) -> tuple[int, Any]:
    """One Inspector CLI call: `target` is `[URL, --transport, http, --header, ...]` or, after `--`, the
    command of a stdio server. Its exit status and its JSON answer."""
    environment = {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(home), "NO_COLOR": "1",
                   "MCP_CATALOG_PATH": str(home / "catalog.json"), **(env or {})}
    command = [*args, *target] if "--" in target else [*target, *args]
    process = await asyncio.create_subprocess_exec(
        str(inspector), "--cli", *command, env=environment, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert out, err.decode(errors="replace")
    return process.returncode or 0, json.loads(out)


def over_http(url: str, token: str) -> list[str]:
    """The target of a call to the gateway's HTTP endpoint with `token`."""
    return [url, "--transport", "http", "--header", f"Authorization: Bearer {token}"]
