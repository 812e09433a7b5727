"""The oldest dependency versions pyproject.toml allows really work: installed exactly, they serve calls.

The pins are derived from pyproject.toml's lower bounds (`aiohttp>=3.10` -> `aiohttp==3.10`), so
raising or adding a bound changes what this test installs. The gateway (no extras) goes into a
fresh venv with those pins; it then imports every module, and serves tools/call with a JWT it
minted itself and argument validation on, to an HTTP backend (the benchmark's stub) run from here.
"""

from __future__ import annotations

import asyncio
import hashlib
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from install.venvs import REPO_ROOT, Venv, call_tool, free_port, wait_ready

pytestmark = pytest.mark.timeout(600)

JWT_SECRET = "lower-bounds-secret-0123456789abcdef"
EVERY_MODULE = """
import pkgutil, importlib, gateway
for module in pkgutil.walk_packages(gateway.__path__, "gateway."):
    if not module.name.startswith(("gateway.demo", "gateway.__main__", "gateway.tracing.provider",
                                   "gateway.tracing.spans", "gateway.catalogue.semantic")):
        # the `demo`, `otel` and `semantic` extras; main: runs
        importlib.import_module(module.name)
"""


def lower_bounds() -> list[str]:
    """`name==version` for every dependency whose bound is `>=version` and that applies here."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = []
    for line in project["dependencies"]:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        (bound,) = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        pins.append(f"{requirement.name}=={bound}")
    return pins


@pytest.fixture(scope="module")
def oldest_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    directory = tmp_path_factory.mktemp("oldest-venv")
    constraints = directory / "constraints.txt"
    constraints.write_text("\n".join(lower_bounds()) + "\n", encoding="utf-8")
    venv = Venv.create(directory)
    venv.pip_install("--constraint", str(constraints), str(wheel))
    return venv


def test_the_pins_are_the_lower_bounds_of_every_dependency() -> None:
    pins = dict(pin.split("==") for pin in lower_bounds())
    assert pins["jsonschema-rs"] == "0.52"  # the first release with validator_for(..., offline=True)
    assert {"aiohttp", "aiohappyeyeballs", "multidict", "referencing", "PyYAML"} <= set(pins)


def test_the_oldest_allowed_versions_are_what_got_installed(oldest_venv: Venv) -> None:
    listed = oldest_venv.run("python", "-m", "pip", "list", "--format=freeze")
    installed = {canonicalize_name(name): Version(version)
                 for name, version in (line.split("==") for line in listed.stdout.splitlines())}
    for pin in lower_bounds():
        name, version = pin.split("==")
        assert installed[canonicalize_name(name)] == Version(version), pin


def test_every_gateway_module_imports_with_the_oldest_versions(oldest_venv: Venv) -> None:
    imported = oldest_venv.run("python", "-c", EVERY_MODULE)
    assert imported.returncode == 0, imported.stderr[-3000:]


@pytest.fixture
def stub_backend() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "bench.stub_backend", "--port", str(port), "--tools", "3"],
                               cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_oldest_versions_serve_a_validated_call_with_a_minted_token(oldest_venv: Venv, stub_backend: str,
                                                                        tmp_path: Path) -> None:
    port = free_port()
    config = _config(tmp_path, port, stub_backend)
    checked = oldest_venv.run("mcp-gateway", "check-config", "--config", str(config))
    assert checked.returncode == 0, checked.stderr
    token = oldest_venv.run("mcp-gateway", "token", "--tenant", "acme", "--config", str(config)).stdout.strip()
    server = oldest_venv.start("mcp-gateway", "serve", "--config", str(config))
    try:
        wait_ready(port, server)
        url = f"http://127.0.0.1:{port}/mcp"
        good = asyncio.run(call_tool(url, token, "stub__echo_0", {"value": "hi", "n": 2}))
        bad = asyncio.run(call_tool(url, token, "stub__echo_0", {"value": 5}))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    assert not good.is_error and good.structured_content == {"value": "hi", "n": 2}
    assert bad.is_error and "5 is not of type 'string'" in bad.content[0].text


def _config(directory: Path, port: int, backend_url: str) -> Path:
    raw: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": port},
        "auth": {"jwt": {"secret": JWT_SECRET},
                 "api_keys": [{"sha256": hashlib.sha256(b"unused").hexdigest(), "tenant": "acme", "subject": "ci"}]},
        "backends": [{"name": "stub", "transport": "http", "url": backend_url}],
        "tenants": {"acme": {"backends": ["*"]}},
    }
    path = directory / "gateway.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path
