"""The built distribution works on its own, as a new user installs it: outside the repository.

The wheel is built from the sdist (conftest), so both are proven; each venv here is fresh and
lives in a temporary directory, and every command runs from there with no PYTHONPATH, so nothing
can come from the source tree. pip's cache makes reruns quick.
"""

from __future__ import annotations

import asyncio
import signal
import time
import zipfile
from pathlib import Path

import pytest

from install.venvs import REPO_ROOT, Venv, call_tool, free_port, wait_ready

pytestmark = pytest.mark.timeout(600)

DEMO_KEY = "demo-acme-key"  # public: the bundled demo config's API key for tenant acme


@pytest.fixture(scope="module")
def demo_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    venv = Venv.create(tmp_path_factory.mktemp("demo-venv"))
    venv.pip_install(f"{wheel}[demo]")
    return venv


@pytest.fixture(scope="module")
def plain_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """The wheel without extras: the gateway alone, no `mcp` SDK for the demo backends."""
    venv = Venv.create(tmp_path_factory.mktemp("plain-venv"))
    venv.pip_install(str(wheel))
    return venv


def test_the_wheel_holds_every_module_the_default_config_and_no_top_level_backends_package(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    source = {str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "gateway").rglob("*.py")}
    demo = {f"gateway/demo/{p.name}" for p in (REPO_ROOT / "backends").glob("*.py")}
    assert {name for name in names if name.endswith(".py")} == source | demo
    assert "gateway/default_config.yaml" in names
    assert "gateway/starter_config.yaml" in names  # what `mcp-gateway init` writes
    static = {f"gateway/admin/static/{p.name}" for p in (REPO_ROOT / "gateway" / "admin" / "static").iterdir()}
    assert static == {f"gateway/admin/static/{name}" for name in ("index.html", "app.js", "style.css")}
    assert static <= names  # the status page, served with no network and no build step


def test_check_config_validates_the_bundled_config_outside_the_repository(demo_venv: Venv) -> None:
    checked = demo_venv.run("mcp-gateway", "check-config")
    assert checked.returncode == 0, checked.stderr
    assert "backend clock (stdio" in checked.stdout
    assert "gateway.demo.clock" in checked.stdout


def test_init_writes_a_starter_config_the_installed_gateway_accepts(demo_venv: Venv) -> None:
    target = demo_venv.path.parent / "starter" / "gateway.yaml"
    target.parent.mkdir(exist_ok=True)
    written = demo_venv.run("mcp-gateway", "init", str(target), "--force")
    assert written.returncode == 0, written.stderr
    checked = demo_venv.run("mcp-gateway", "check-config", "--config", str(target))
    assert checked.returncode == 0, checked.stderr
    assert "backend calc (stdio" in checked.stdout


def test_serve_runs_the_demo_and_answers_a_tools_call(demo_venv: Venv) -> None:
    port = free_port()
    server = demo_venv.start("mcp-gateway", "serve", "--port", str(port))
    try:
        wait_ready(port, server)
        result = asyncio.run(call_tool(f"http://127.0.0.1:{port}/mcp", DEMO_KEY, "calc__add", {"a": 2, "b": 3}))
        assert result.structured_content == {"result": 5.0}
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    assert server.returncode == 0


def test_nothing_from_the_source_tree_is_visible_to_the_installed_gateway(demo_venv: Venv) -> None:
    located = demo_venv.run("python", "-c", "import gateway; print(gateway.__file__)")
    assert str(demo_venv.path) in located.stdout
    assert not located.stdout.startswith(str(REPO_ROOT))


@pytest.mark.parametrize("command", [["serve", "--port", str(free_port())], ["check-config"]], ids=lambda c: c[0])
def test_without_the_demo_extra_the_default_config_stops_at_once_with_one_line(plain_venv: Venv,
                                                                                command: list[str]) -> None:
    started = time.monotonic()
    refused = plain_venv.run("mcp-gateway", *command)
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        "config error: backends[0].command: the demo backends need the `demo` extra: "
        "pip install 'mcp-gateway[demo]'"]
    assert time.monotonic() - started < 20  # at once: no crash-looping children, no waiting for readiness
