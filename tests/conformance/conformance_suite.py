"""The official MCP conformance suite (npm `@modelcontextprotocol/conformance`), installed and run.

Installed once into `.conformance/` at the repository root (git-ignored; reused while the pins
match), together with Node 22 from the npm package `node`, which the suite needs: only `npm`
has to be on PATH. Without npm the conformance tests skip, unless MCPGW_REQUIRE_CONFORMANCE=1
(set by `.ci/run`) makes that a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

SUITE_VERSION = "0.2.0-alpha.11"  # the first release with both requirement sets, 2025-11-25 and 2026-07-28
NODE_VERSION = "22.23.3"
INSTALL_DIR = Path(__file__).resolve().parents[2] / ".conformance"
INSTALL_TIMEOUT_SECONDS = 300
LEG_TIMEOUT_SECONDS = 240
REQUIRE_ENV = "MCPGW_REQUIRE_CONFORMANCE"
_SUMMARY = re.compile(r"^Total: (\d+) passed, (\d+) failed", re.MULTILINE)
_FAILED_SCENARIO = re.compile(r"^✗ (\S+): (\d+) passed, (\d+) failed", re.MULTILINE)
_ONE_SCENARIO = re.compile(r"^Passed: (\d+)/\d+, (\d+) failed, (\d+) warnings", re.MULTILINE)


def _bin(name: str) -> Path:
    return INSTALL_DIR / "node_modules" / ".bin" / name


def _installed_version() -> str | None:
    package = INSTALL_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "package.json"
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


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1: the conformance suite must run here)")
    pytest.skip(reason)


def ensure_installed() -> Path:
    """The `conformance` command, installing the pinned suite and Node first if needed."""
    if _installed_version() == SUITE_VERSION and _node_ok():
        return _bin("conformance")
    npm = shutil.which("npm")
    if npm is None:
        _unavailable("npm is not installed, so the MCP conformance suite cannot be installed")
    INSTALL_DIR.mkdir(exist_ok=True)
    packages = [f"node@{NODE_VERSION}", f"@modelcontextprotocol/conformance@{SUITE_VERSION}"]
    command = [str(npm), "install", "--prefix", str(INSTALL_DIR), "--no-save", "--no-package-lock", "--no-audit",
               "--no-fund", "--loglevel=error", *packages]
    try:
        subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_SECONDS, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        _unavailable(f"npm could not install the MCP conformance suite: {detail.strip()[-500:]}")
    if _installed_version() != SUITE_VERSION or not _node_ok():
        _unavailable(f"the conformance suite or Node {NODE_VERSION} did not install into {INSTALL_DIR}")
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

    def report(self, name: str) -> str:
        return (f"conformance leg {name}: {self.passed} checks passed, {self.failed} failed "
                f"(failing scenarios: {', '.join(self.failed_scenarios) or 'none'}), exit {self.returncode}, "
                f"{self.seconds:.1f} s")


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
                       "\n".join(output for _, output in runs))
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
