"""The official MCP conformance suite (npm `@modelcontextprotocol/conformance`), installed and run.

Installed once into `.conformance/` at the repository root (git-ignored; reused while the pins
match), together with Node 22 from the npm package `node`, which the suite needs, and the Node
reference servers the SDK-client parity test runs (`REFERENCE_SERVERS`): one install, one Node,
reused by every test that needs them. Only `npm` has to be on PATH. Without npm the tests that need
them skip, unless MCPGW_REQUIRE_CONFORMANCE=1 (set by `.ci/run`) makes that a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from npm_packages import ensure

SUITE_VERSION = "0.2.0-alpha.11"  # the first release with both requirement sets, 2025-11-25 and 2026-07-28
NODE_VERSION = "22.23.3"
REFERENCE_VERSION = "2026.8.31"
REFERENCE_SERVERS = ("server-everything", "server-memory", "server-filesystem")
"""The `@modelcontextprotocol/` reference servers of tests/e2e/test_parity_reference.py, at REFERENCE_VERSION."""
INSTALL_DIR = Path(__file__).resolve().parents[2] / ".conformance"
LEG_TIMEOUT_SECONDS = 240
REQUIRE_ENV = "MCPGW_REQUIRE_CONFORMANCE"
_SUMMARY = re.compile(r"^Total: (\d+) passed, (\d+) failed", re.MULTILINE)
_FAILED_SCENARIO = re.compile(r"^✗ (\S+): (\d+) passed, (\d+) failed", re.MULTILINE)
_ONE_SCENARIO = re.compile(r"^Passed: (\d+)/\d+, (\d+) failed, (\d+) warnings", re.MULTILINE)
_TIMESTAMPED = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
"""The run's time the suite appends to each scenario's output folder."""


def _bin(name: str) -> Path:
    return INSTALL_DIR / "node_modules" / ".bin" / name


def _installed_version(name: str = "conformance") -> str | None:
    package = INSTALL_DIR / "node_modules" / "@modelcontextprotocol" / name / "package.json"
    try:
        return str(json.loads(package.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def _node_ok() -> bool:
    try:
        out = subprocess.run([_bin("node"), "--version"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.stdout.strip() == f"v{NODE_VERSION}"


def _all_installed() -> bool:
    return (_installed_version() == SUITE_VERSION and _node_ok()
            and all(_installed_version(name) == REFERENCE_VERSION for name in REFERENCE_SERVERS))


def node() -> Path:
    """The pinned Node (after `ensure_installed`)."""
    return _bin("node")


def reference_server(name: str) -> Path:
    """The entry script of one of REFERENCE_SERVERS (after `ensure_installed`), to run with `node()`."""
    package = INSTALL_DIR / "node_modules" / "@modelcontextprotocol" / name
    return package / json.loads((package / "package.json").read_text())["bin"][f"mcp-{name}"]


def ensure_installed() -> Path:
    """The `conformance` command, installing the pinned suite, Node and the reference servers first if needed."""
    packages = [f"node@{NODE_VERSION}", f"@modelcontextprotocol/conformance@{SUITE_VERSION}",
                *(f"@modelcontextprotocol/{name}@{REFERENCE_VERSION}" for name in REFERENCE_SERVERS)]
    ensure(INSTALL_DIR, packages, installed=_all_installed, require_env=REQUIRE_ENV,
           what=f"the MCP conformance suite (with Node {NODE_VERSION} and the reference servers)")
    return _bin("conformance")


@dataclass
class LegResult:
    """One run of the suite: its exit status, the checks' totals and the scenarios with failed checks."""

    returncode: int
    passed: int
    failed: int
    failed_scenarios: list[str]
    seconds: float
    output: str
    out_dir: Path | None = None

    def verdicts(self) -> dict[str, list[tuple[str, str]]]:
        """Each scenario's checks, as (check id, status) sorted: what a parity comparison compares."""
        found: dict[str, list[tuple[str, str]]] = {}
        for checks in sorted((self.out_dir or Path("/nonexistent")).glob("*/checks.json")):
            scenario = _TIMESTAMPED.sub("", checks.parent.name).removeprefix("server-")
            found[scenario] = sorted((str(c.get("id")), str(c.get("status"))) for c in json.loads(checks.read_text()))
        return found

    def report(self, name: str) -> str:
        return (f"conformance leg {name}: {self.passed} checks passed, {self.failed} failed "
                f"(failing scenarios: {', '.join(self.failed_scenarios) or 'none'}), exit {self.returncode}, "
                f"{self.seconds:.1f} s")


def lost(one: dict[str, list[tuple[str, str]]], other: dict[str, list[tuple[str, str]]],
         status: str) -> dict[str, list[str]]:
    """Per scenario of `one`, the checks (by id, counted) that end in `status` there but not in `other`."""
    out = {}
    for scenario, checks in one.items():
        missing = Counter(i for i, s in checks if s == status) - Counter(
            i for i, s in other.get(scenario, []) if s == status)
        if missing:
            out[scenario] = sorted(missing.elements())
    return out


async def run_leg(command: Path, url: str, requirements: str, out_dir: Path,
                  expected_failures: Path | None = None, scenarios: list[str] | None = None) -> LegResult:
    """Run the server-side suite against `url`: a requirement set, or the named scenarios at it."""
    args = ["server", "--url", url, "-o", str(out_dir)]
    if expected_failures is not None:
        args += ["--expected-failures", str(expected_failures)]
    env = {**os.environ, "PATH": f"{command.parent}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1"}
    started = time.monotonic()
    runs = []
    for scenario in scenarios or [None]:
        selection = ["--requirements", requirements] if scenario is None else [
            "--scenario", scenario, "--spec-version", requirements]
        runs.append(await _run([str(command), *args, *selection], env))
    result = LegResult(max(code for code, _ in runs), 0, 0, [], time.monotonic() - started,
                       "\n".join(output for _, output in runs), out_dir)
    for scenario, (_, output) in zip(scenarios or [None], runs, strict=True):
        _count(result, output, scenario)
    return result


def _count(result: LegResult, output: str, scenario: str | None) -> None:
    """Add one run's totals: a requirement set's summary, or one scenario's "Passed: n/m" line."""
    if scenario is None:
        for passed, failed in _SUMMARY.findall(output):
            result.passed += int(passed)
            result.failed += int(failed)
        result.failed_scenarios += [match[0] for match in _FAILED_SCENARIO.findall(output)]
        return
    for passed, failed, warnings in _ONE_SCENARIO.findall(output):
        result.passed += int(passed)
        result.failed += int(failed) + int(warnings)
        if int(failed) + int(warnings):
            result.failed_scenarios.append(scenario)


async def _run(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(*argv, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        stdout, _ = await asyncio.wait_for(process.communicate(), LEG_TIMEOUT_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    return process.returncode or 0, stdout.decode(errors="replace")
