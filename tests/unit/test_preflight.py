"""gateway.preflight: what would fail at start is found before starting, each problem with its key path."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway import preflight
from gateway.config import parse_config


def problems(*backends: dict[str, Any]) -> list[str]:
    return [str(p) for p in preflight.problems(parse_config({"backends": list(backends)}, {}))]


def stdio(command: list[str], name: str = "b", **extra: Any) -> dict[str, Any]:
    return {"name": name, "transport": "stdio", "command": command, **extra}


def http(url: str, **extra: Any) -> dict[str, Any]:
    return {"name": "web", "transport": "http", "url": url, **extra}


def test_runnable_commands_and_a_plain_http_backend_have_no_problem() -> None:
    assert problems(stdio(["python", "-m", "gateway.demo.clock"]), stdio(["sh", "-c", "true"], name="sh"),
                    http("https://search.example.com:8443/mcp")) == []


def test_a_command_not_on_path_is_named() -> None:
    assert problems(stdio(["mcp-no-such-server", "--stdio"])) == [
        "backends[0].command: 'mcp-no-such-server' not found (not on PATH, or not an executable file)"]


def test_a_command_is_looked_up_on_the_path_the_child_will_get(tmp_path: Path) -> None:
    tool = tmp_path / "my-mcp-server"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    assert problems(stdio(["my-mcp-server"], env={"PATH": f"{tmp_path}{os.pathsep}/usr/bin"})) == []


def test_a_relative_program_is_resolved_from_the_backend_cwd(tmp_path: Path) -> None:
    (tmp_path / "server.sh").write_text("#!/bin/sh\n")  # not executable
    assert problems(stdio(["./server.sh"], cwd=str(tmp_path))) == [
        "backends[0].command: './server.sh' not found (not on PATH, or not an executable file)"]


def test_a_missing_python_module_is_named() -> None:
    assert problems(stdio(["python", "-m", "no_such_mcp_server.main"])) == [
        f"backends[0].command: no module named 'no_such_mcp_server' for {sys.executable} -m no_such_mcp_server.main"]


def test_a_module_in_the_backend_cwd_or_its_pythonpath_is_found(tmp_path: Path) -> None:
    (tmp_path / "local_server.py").write_text("")
    assert problems(stdio(["python", "-m", "local_server"], cwd=str(tmp_path))) == []
    assert problems(stdio(["python", "-m", "local_server"], env={"PYTHONPATH": str(tmp_path)})) == []


def test_the_demo_without_its_extra_is_one_problem_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "DEMO_REQUIRES", ("an_sdk_that_is_not_installed",))
    demo = [stdio(["python", "-m", f"gateway.demo.{name}"], name=name) for name in ("clock", "calc")]
    assert problems(*demo) == [
        "backends[0].command: the demo backends need the `demo` extra: pip install 'mcp-gateway[demo]'"]


@pytest.mark.parametrize("value", ["Bearer ${SEARCH_TOKEN:-}", "${SEARCH_TOKEN:-}"])
def test_a_credential_header_that_expanded_to_nothing_is_named(value: str) -> None:
    assert problems(http("http://search/mcp", headers={"Authorization": value})) == [
        "backends[0].headers.Authorization: empty (an environment variable expanded to nothing?)"]
