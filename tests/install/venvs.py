"""Fresh virtual environments in a temporary directory, and commands run in them as a user would.

Every command runs from the venv's parent directory (outside the repository) with an environment
that has no PYTHONPATH and only the venv's `bin` before the system's, so what runs is what pip
installed. pip keeps its own cache (not disabled here), so repeated runs download nothing.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

REPO_ROOT = Path(__file__).resolve().parents[2]
PIP_TIMEOUT = 420.0
RUN_TIMEOUT = 60.0
SERVE_READY_SECONDS = 60.0
PASSED_ON = ("HOME", "LANG", "TMPDIR", "PIP_CACHE_DIR", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL",
             "PIP_FIND_LINKS", "PIP_CERT", "PIP_DEFAULT_TIMEOUT", "SSL_CERT_FILE", "HTTPS_PROXY", "HTTP_PROXY",
             "NO_PROXY")
"""What a user's shell would also have: a home (pip's cache), locale, and how pip reaches an index."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Venv:
    path: Path

    @classmethod
    def create(cls, parent: Path) -> Venv:
        path = parent / "venv"
        venv.EnvBuilder(with_pip=True).create(path)
        return cls(path)

    @property
    def env(self) -> dict[str, str]:
        inherited = {key: os.environ[key] for key in PASSED_ON if key in os.environ}
        return {**inherited, "PATH": f"{self.path / 'bin'}:/usr/bin:/bin", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

    def command(self, program: str, *args: str) -> list[str]:
        return [str(self.path / "bin" / program), *args]

    def pip_install(self, *requirements: str) -> None:
        installed = subprocess.run(self.command("python", "-m", "pip", "install", "--quiet", *requirements),
                                   cwd=self.path.parent, env=self.env, capture_output=True, text=True,
                                   timeout=PIP_TIMEOUT)
        assert installed.returncode == 0, installed.stderr[-2000:]

    def run(self, program: str, *args: str, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(program, *args), cwd=self.path.parent, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def start(self, program: str, *args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.command(program, *args), cwd=self.path.parent, env=self.env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)




def wait_ready(port: int, server: subprocess.Popen[bytes]) -> None:
    """Until the served gateway's /readyz says 200 (or it exits, or time runs out)."""
    deadline = time.monotonic() + SERVE_READY_SECONDS
    while time.monotonic() < deadline:
        assert server.poll() is None, f"serve exited with status {server.returncode}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail(f"the gateway was not ready within {SERVE_READY_SECONDS:g}s")


async def call_tool(url: str, token: str, name: str, arguments: dict[str, Any]) -> Any:
    """One tools/call through the official SDK client, as any MCP client would make it."""
    async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
                Client(streamable_http_client(url, http_client=http)) as client):
        return await client.call_tool(name, arguments)
