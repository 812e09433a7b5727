"""Helpers and fixtures that run the demo backends (``backends/``) as real processes.

A plain module (not a conftest) so any conftest or test module can import what it needs:

    from backend_fixtures import http_backend, start_http_backend, stdio_command
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NoReturn, Protocol

import pytest
from aiohttp import web

REPO_ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
START_TIMEOUT_SECONDS = 15.0
STOP_TIMEOUT_SECONDS = 5.0
_START_ATTEMPTS = 3  # a free port can be taken by someone else before the child binds it


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def stdio_command(name: str, *args: str) -> list[str]:
    """The command line that runs backend ``name`` over stdio."""
    return [sys.executable, "-m", f"gateway.demo.{name}", *args]


class BackendStartError(RuntimeError):
    """The backend process exited or never opened its port."""


@dataclass
class RunningBackend:
    """A backend subprocess serving Streamable HTTP on ``port``."""

    name: str
    args: tuple[str, ...]
    port: int
    env: Mapping[str, str] | None = None
    script: Path | None = None  # a backend outside gateway.demo, run as `python SCRIPT`
    process: asyncio.subprocess.Process | None = None
    _stderr: IO[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/mcp"

    async def start(self) -> None:
        """Spawn the process and wait until its port accepts connections."""
        # stderr goes to a file, not a pipe: nobody drains a pipe, and a full one blocks the child.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        program = [sys.executable, str(self.script)] if self.script else stdio_command(self.name)
        command = [*program, "--transport", "http", "--port", str(self.port)]
        self.process = await asyncio.create_subprocess_exec(
            *command,
            *self.args,
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(self.env or {})},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=self._stderr,
        )
        try:
            await self._wait_ready(self.process)
        except BackendStartError:
            await self.stop()
            raise

    async def _wait_ready(self, process: asyncio.subprocess.Process) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if process.returncode is not None:
                self._fail(f"exited with status {process.returncode}")
            if await _port_open(self.port):
                return
            await asyncio.sleep(0.05)
        self._fail(f"did not listen on port {self.port} within {START_TIMEOUT_SECONDS:g}s")

    def _fail(self, what: str) -> NoReturn:
        raise BackendStartError(f"backend {self.name} {what}\n--- stderr ---\n{self.stderr_text()}")

    async def stop(self) -> None:
        """Terminate the process (kill it if it lingers); safe to call twice."""
        process, self.process = self.process, None
        if process is not None:
            await stop_process(process)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    async def restart(self) -> None:
        """Stop and start again on the same port (the URL stays valid)."""
        await self.stop()
        await self.start()

    def stderr_text(self) -> str:
        """What the current process wrote to stderr so far (for failure messages)."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")


async def stop_process(process: asyncio.subprocess.Process, grace: float = STOP_TIMEOUT_SECONDS) -> None:
    """SIGTERM, a bounded wait, then SIGKILL: no test leaves a process behind."""
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):  # exited but not yet reaped
        process.terminate()
    try:
        await asyncio.wait_for(process.wait(), grace)
    except TimeoutError:
        process.kill()
        await process.wait()


async def _port_open(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection(HOST, port)
    except OSError:
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


async def start_http_backend(name: str, *args: str, env: Mapping[str, str] | None = None,
                             script: Path | None = None) -> RunningBackend:
    """Start ``python -m gateway.demo.<name> --transport http`` (or ``python SCRIPT``) on a free port."""
    for attempt in range(1, _START_ATTEMPTS + 1):
        backend = RunningBackend(name=name, args=args, port=free_port(), env=env, script=script)
        try:
            await backend.start()
            return backend
        except BackendStartError as exc:
            if attempt == _START_ATTEMPTS or "address already in use" not in str(exc).lower():
                raise
    raise AssertionError("unreachable")


class StartBackend(Protocol):
    """Signature of the function the ``http_backend`` fixture yields."""

    async def __call__(self, name: str, *args: str, env: Mapping[str, str] | None = None) -> RunningBackend: ...


@pytest.fixture
async def http_backend() -> AsyncIterator[StartBackend]:
    """Yield ``start(name, *args, env=None)``; every backend it started is stopped afterwards."""
    started: list[RunningBackend] = []

    async def start(name: str, *args: str, env: Mapping[str, str] | None = None) -> RunningBackend:
        backend = await start_http_backend(name, *args, env=env)
        started.append(backend)
        return backend

    yield start
    for backend in started:
        await backend.stop()


def recording_backend(on_call: Callable[[web.Request, dict[str, Any]], dict[str, Any]],
                      session_id: str | None = None) -> web.Application:
    """A minimal handshake-era Streamable HTTP MCP backend (JSON replies) of one tool, `echo`: a tools/call's
    result is `on_call(request, params)`, where a test records what reached the backend. With `session_id`
    it hands out that session (and accepts its DELETE)."""
    headers = {"Mcp-Session-Id": session_id} if session_id else None

    async def mcp(request: web.Request) -> web.Response:
        body = await request.json()
        if "id" not in body:
            return web.Response(status=202)
        result: dict[str, Any] = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                  "serverInfo": {"name": "recorder", "version": "1"}}
        if body["method"] == "tools/list":
            result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        elif body["method"] == "tools/call":
            result = on_call(request, body["params"])
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": result}, headers=headers)

    app = web.Application()
    app.router.add_post("/mcp", mcp)
    if session_id:
        app.router.add_delete("/mcp", lambda request: web.Response(status=200))
    return app
