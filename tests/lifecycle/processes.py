"""Run `python -m gateway` as a real process, and look at it and its children from outside.

Linux only: process trees and socket owners are read from /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import aiohttp
import orjson
import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
API_KEY = "lifecycle-test-key"
READY_TIMEOUT = 30.0
EXIT_TIMEOUT = 20.0
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "Authorization": f"Bearer {API_KEY}"}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def calc_backend(name: str = "calc", **extra: Any) -> dict[str, Any]:
    """The demo calculator as a stdio child (its `slow` tool sleeps and reports progress)."""
    return {"name": name, "transport": "stdio", "command": [sys.executable, "-m", "gateway.demo.calc"],
            "cwd": str(REPO_ROOT), **extra}


def gateway_config(directory: Path, *, port: int, grace: float = 10.0, backends: list[dict[str, Any]] | None = None,
                   **sections: Any) -> Path:
    """A config file with one API key (tenant acme) and the calc backend, bound to loopback."""
    server = {"host": HOST, "port": port, "shutdown_grace_seconds": grace, **sections.pop("server", {})}
    auth = {"api_keys": [{"sha256": hashlib.sha256(API_KEY.encode()).hexdigest(), "tenant": "acme",
                          "subject": "lifecycle"}], **sections.pop("auth", {})}
    raw = {"server": server, "auth": auth, "backends": [calc_backend()] if backends is None else backends,
           "tenants": {"acme": {"backends": ["*"]}}, "logging": {"level": "info", "format": "json"}, **sections}
    path = directory / "gateway.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def gateway_env(**extra: str) -> dict[str, str]:
    """The test's environment minus anything that would reconfigure the gateway behind our back."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPGW_", "PROMETHEUS_MULTIPROC"))}
    env.pop("MCP_GATEWAY_TOKEN", None)
    return {**env, **extra}


# ---------------------------------------------------------------- the process tree


def parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # the command name may hold spaces and parens


def children_of(pid: int) -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and parent_of(int(entry)) == pid]


def descendants_of(pid: int) -> list[int]:
    found: list[int] = []
    for child in children_of(pid):
        found += [child, *descendants_of(child)]
    return found


def is_running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def wait_gone(pids: Iterable[int], timeout: float = 10.0) -> list[int]:  # noqa: ASYNC109
    """The pids still running after `timeout` seconds (empty when all are gone)."""
    deadline = time.monotonic() + timeout
    remaining = list(pids)
    while remaining and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        remaining = [pid for pid in remaining if is_running(pid)]
    return remaining


def socket_owner(sock: socket.socket, candidates: Iterable[int]) -> int | None:
    """Which of `candidates` holds the server end of this loopback TCP connection."""
    client_port, server_port = sock.getsockname()[1], sock.getpeername()[1]
    inode = _server_socket_inode(server_port, client_port)
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid in candidates:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        return pid
    return None


def _server_socket_inode(local_port: int, remote_port: int) -> str | None:
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, inode = fields[1], fields[2], fields[9]
        if int(local.split(":")[1], 16) == local_port and int(remote.split(":")[1], 16) == remote_port:
            return inode
    return None


# ---------------------------------------------------------------- the gateway process


class GatewayProcess:
    """`python -m gateway serve …` in its own process group, output in temp files."""

    def __init__(self, process: asyncio.subprocess.Process, port: int, stdout: IO[bytes], stderr: IO[bytes]) -> None:
        self.process = process
        self.port = port
        self._stdout = stdout
        self._stderr = stderr
        self.known_pids: set[int] = set()

    @classmethod
    async def start(cls, config: Path, port: int, *args: str) -> GatewayProcess:
        stdout, stderr = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", str(port), *args,
            cwd=REPO_ROOT, env=gateway_env(), stdin=asyncio.subprocess.DEVNULL, stdout=stdout, stderr=stderr,
            start_new_session=True,  # a group of its own: teardown can kill every leftover at once
        )
        return cls(process, port, stdout, stderr)

    @property
    def pid(self) -> int:
        return self.process.pid

    def url(self, path: str = "/mcp") -> str:
        return f"http://{HOST}:{self.port}{path}"

    def tree(self) -> list[int]:
        """The gateway's descendants now (workers, stdio children); remembered for teardown."""
        pids = descendants_of(self.pid)
        self.known_pids.update(pids)
        return pids

    async def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.returncode is not None:
                pytest.fail(f"gateway exited with {self.process.returncode}\n{self.output()}")
            if await http_status(self.url("/readyz")) == 200:
                return
            await asyncio.sleep(0.1)
        pytest.fail(f"gateway not ready within {timeout:g}s\n{self.output()}")

    async def wait_exit(self, timeout: float = EXIT_TIMEOUT) -> int:  # noqa: ASYNC109
        try:
            return await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            pytest.fail(f"gateway still running {timeout:g}s later\n{self.output()}")

    async def expect_exit(self, status: int, timeout: float = EXIT_TIMEOUT) -> None:  # noqa: ASYNC109
        """Wait for the exit; a different status fails with everything the gateway wrote."""
        code = await self.wait_exit(timeout)
        assert code == status, f"exit status {code}, expected {status}\n{self.output()}"

    def signal(self, sig: signal.Signals) -> None:
        os.kill(self.pid, sig)

    def events(self) -> list[dict[str, Any]]:
        """The JSON log lines the gateway wrote (stdout)."""
        return [event for line in _read(self._stdout).splitlines() if isinstance(event := _json(line), dict)]

    def event(self, name: str) -> dict[str, Any]:
        found = [e for e in self.events() if e.get("event") == name]
        assert found, f"no {name!r} log line\n{self.output()}"
        return found[-1]

    def output(self) -> str:
        return f"--- stdout ---\n{_read(self._stdout)}\n--- stderr ---\n{_read(self._stderr)}"

    async def stop(self) -> None:
        """Teardown: whatever is left of the process group and the known children is killed."""
        leftovers = [pid for pid in self.known_pids | set(self.tree()) if is_running(pid)]
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            await asyncio.wait_for(self.process.wait(), 10)
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._stdout.close()
        self._stderr.close()


def _json(line: str) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


def _read(file: IO[bytes]) -> str:
    file.seek(0)
    return file.read().decode(errors="replace")


# ---------------------------------------------------------------- HTTP


async def http_status(url: str, timeout: float = 2.0) -> int | None:  # noqa: ASYNC109
    """The status of a GET on a fresh connection, or None when the connection is refused."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session, \
                session.get(url) as response:
            return response.status
    except (aiohttp.ClientConnectionError, TimeoutError):
        return None


async def initialize(session: aiohttp.ClientSession, url: str) -> str:
    """A new MCP session; returns its id."""
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    async with session.post(url, data=orjson.dumps(body), headers=MCP_HEADERS) as response:
        assert response.status == 200, await response.text()
        session_id = response.headers["Mcp-Session-Id"]
    headers = {**MCP_HEADERS, "Mcp-Session-Id": session_id}
    async with session.post(url, data=orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                            headers=headers) as response:
        assert response.status == 202
    return session_id


def sse_data(block: bytes) -> Any:
    """The JSON payload of one SSE event block (its `data:` lines)."""
    lines = [line[5:].strip() for line in block.split(b"\n") if line.startswith(b"data:")]
    return orjson.loads(b"\n".join(lines)) if lines else None
