"""A served gateway with two tenants, hostile clients, and what to watch from outside.

Tenant `acme` plays the attacker, tenant `globex` the legitimate client whose calls must
keep being answered within LEGIT_DEADLINE while the attack runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml
from lifecycle.processes import HOST, REPO_ROOT, GatewayProcess, calc_backend, gateway_env

ATTACKER_KEY = "hardening-acme-key"
LEGIT_KEY = "hardening-globex-key"
JWT_SECRET = "hardening-secret-0123456789abcdef0123456789"
LEGIT_DEADLINE = 1.0
"""Every call of the other tenant is answered within this many seconds during an attack."""
ACCEPT = "application/json, text/event-stream"
ADD = {"name": "calc__add", "arguments": {"a": 2, "b": 3}}


def headers(key: str, **extra: str) -> dict[str, str]:
    return {"Accept": ACCEPT, "Content-Type": "application/json", "Authorization": f"Bearer {key}", **extra}


def write_config(directory: Path, port: int, **sections: Any) -> Path:
    """Two tenants with an API key each (acme also by JWT), the calc backend, JSON logs on stdout."""
    keys = [{"sha256": hashlib.sha256(key.encode()).hexdigest(), "tenant": tenant, "subject": subject,
             "scopes": ["mcpgw:admin"]} for key, tenant, subject in
            ((ATTACKER_KEY, "acme", "attacker"), (LEGIT_KEY, "globex", "legit"))]
    raw = {
        "server": {"host": HOST, "port": port, "shutdown_grace_seconds": 2, **sections.pop("server", {})},
        "auth": {"api_keys": keys, "jwt": {"secret": JWT_SECRET}, **sections.pop("auth", {})},
        "backends": sections.pop("backends", [calc_backend()]),
        "tenants": sections.pop("tenants", {"acme": {"backends": ["*"]}, "globex": {"backends": ["*"]}}),
        "logging": {"level": "info", "format": "json"},
        **sections,
    }
    path = directory / "gateway.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


async def start_process(config: Path, port: int, *, open_files: int | None = None,
                        env: dict[str, str] | None = None) -> GatewayProcess:
    """`python -m gateway serve`, optionally started with a lower open-file soft limit."""
    stdout, stderr = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()

    def lower_limit() -> None:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", str(port),
        cwd=REPO_ROOT, env=gateway_env(**(env or {})), stdin=asyncio.subprocess.DEVNULL, stdout=stdout, stderr=stderr,
        start_new_session=True, preexec_fn=lower_limit)
    gateway = GatewayProcess(process, port, stdout, stderr)
    try:
        await gateway.wait_ready()
    except BaseException:
        await gateway.stop()
        raise
    return gateway


def raise_own_file_limit() -> None:
    """The test process holds thousands of sockets too."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# ---------------------------------------------------------------- watching the process


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def socket_count(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return count


def open_file_limit(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-file limit")


async def until(condition: Callable[[], bool], timeout: float, every: float = 0.1) -> bool:  # noqa: ASYNC109
    """Whether `condition` came true within `timeout` seconds (polled: it reads /proc)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(every)
    return True


def log_lines(gateway: GatewayProcess, event: str) -> list[dict[str, Any]]:
    return [line for line in gateway.events() if line.get("event") == event]


# ---------------------------------------------------------------- MCP over plain HTTP


async def initialize(http: aiohttp.ClientSession, url: str, key: str, version: str = "2025-11-25") -> str:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    async with http.post(url, data=orjson.dumps(body), headers=headers(key)) as reply:
        assert reply.status == 200, await reply.text()
        session = reply.headers["Mcp-Session-Id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with http.post(url, data=orjson.dumps(note), headers=headers(key, **{"Mcp-Session-Id": session})) as reply:
        assert reply.status == 202
    return session


@dataclass
class LegitClient:
    """The other tenant: a tools/call on a fresh connection every `interval`, each one timed."""

    url: str
    interval: float = 0.2
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    async def run(self, stop: asyncio.Event) -> None:
        timeout = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            session = await initialize(http, self.url, LEGIT_KEY)
        body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ADD})
        while not stop.is_set():
            started = time.monotonic()
            try:
                async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(force_close=True)) \
                        as http, http.post(self.url, data=body,
                                           headers=headers(LEGIT_KEY, **{"Mcp-Session-Id": session})) as reply:
                    answer = await reply.json()
                    assert reply.status == 200 and "result" in answer, answer
                self.latencies.append(time.monotonic() - started)
            except Exception as exc:  # recorded: the test reports every failure at once
                self.failures.append(repr(exc))
            await asyncio.sleep(self.interval)

    def check(self, minimum_calls: int) -> None:
        assert not self.failures, self.failures[:5]
        assert len(self.latencies) >= minimum_calls, self.latencies
        assert max(self.latencies) < LEGIT_DEADLINE, sorted(self.latencies)[-5:]


@contextlib.asynccontextmanager
async def legit_client(url: str) -> Any:
    """A LegitClient running for the duration of the block."""
    client, stop = LegitClient(url), asyncio.Event()
    task = asyncio.create_task(client.run(stop))
    try:
        yield client
    finally:
        stop.set()
        await task
