"""Live reload against the real process: `python -m gateway serve`, its config file rewritten,
then SIGHUP or POST /admin/reload. Sessions opened before the reload are used after it."""

from __future__ import annotations

import asyncio
import hashlib
import signal
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import redis.asyncio as redis
import yaml

from lifecycle.processes import HOST, REPO_ROOT, GatewayProcess, children_of, free_port, sse_data, wait_gone

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")]

USER_KEY, ADMIN_KEY, METRICS_TOKEN = "reload-user-key", "reload-admin-key", "reload-metrics-token"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
WAIT = 20.0


def calc(name: str, **extra: Any) -> dict[str, Any]:
    """The demo calculator as a stdio child; `MARK` in its environment tells its process apart."""
    return {"name": name, "transport": "stdio", "command": [sys.executable, "-m", "gateway.demo.calc"],
            "cwd": str(REPO_ROOT), "env": {"MARK": name}, **extra}


def key(secret: str, tenant: str = "acme", scopes: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"sha256": hashlib.sha256(secret.encode()).hexdigest(), "tenant": tenant, "subject": secret,
            "scopes": list(scopes)}


def write_config(path: Path, *, backends: list[dict[str, Any]], allow: tuple[str, ...] = ("*",),
                 user_key: str = USER_KEY, **sections: Any) -> Path:
    raw = {"server": {"host": HOST, **sections.pop("server", {})},
           "auth": {"api_keys": [key(user_key), key(ADMIN_KEY, "ops", ("mcpgw:admin",))]},
           "backends": backends,
           "tenants": {"acme": {"backends": ["*"], "tools": {"allow": list(allow)}}, "ops": {"backends": []}},
           "metrics": {"token": METRICS_TOKEN}, "logging": {"level": "info", "format": "json"}, **sections}
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


class Client:
    """One MCP session over HTTP, with its GET stream read into a queue."""

    def __init__(self, http: aiohttp.ClientSession, url: str, token: str = USER_KEY) -> None:
        self.http, self.url = http, url
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                        "Authorization": f"Bearer {token}"}
        self.notifications: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._stream: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()  # set once the GET stream's headers are in: notifications reach it
        self._ids = iter(range(1, 1_000_000))

    async def open(self) -> Client:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        reply = await self.rpc("initialize", params)
        assert "result" in reply, reply
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self._stream = asyncio.create_task(self._listen())
        await asyncio.wait_for(self._listening.wait(), WAIT)  # a change made after open() must reach the stream
        return self

    async def post(self, body: dict[str, Any]) -> tuple[int, Any]:
        async with self.http.post(self.url, data=orjson.dumps(body), headers=self.headers) as response:
            if "Mcp-Session-Id" in response.headers:
                self.headers["Mcp-Session-Id"] = response.headers["Mcp-Session-Id"]
            raw = await response.read()
            if response.content_type == "text/event-stream":
                found = [sse_data(block) for block in raw.replace(b"\r\n", b"\n").split(b"\n\n")]
                return response.status, next(m for m in found if isinstance(m, dict) and "id" in m)
            return response.status, orjson.loads(raw) if raw else None

    async def rpc(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        status, reply = await self.post({"jsonrpc": "2.0", "id": next(self._ids), "method": method,
                                         "params": params or {}})
        assert status == 200, (status, reply)
        return reply

    async def tools(self) -> set[str]:
        return {tool["name"] for tool in (await self.rpc("tools/list"))["result"]["tools"]}

    async def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        return await self.rpc("tools/call", {"name": name, "arguments": arguments})

    async def notified(self, method: str, timeout: float = WAIT) -> None:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            message = await asyncio.wait_for(self.notifications.get(), left)
            if message.get("method") == method:
                return
        pytest.fail(f"no {method} within {timeout:g}s")

    async def _listen(self) -> None:
        headers = {k: v for k, v in self.headers.items() if k != "Content-Type"} | {"Accept": "text/event-stream"}
        async with self.http.get(self.url, headers=headers) as response:
            assert response.status == 200
            self._listening.set()
            buffer = b""
            async for chunk in response.content.iter_any():
                buffer += chunk.replace(b"\r\n", b"\n")
                while b"\n\n" in buffer:
                    block, buffer = buffer.split(b"\n\n", 1)
                    if isinstance(data := sse_data(block), dict):
                        self.notifications.put_nowait(data)

    async def close(self) -> None:
        if self._stream is not None:
            self._stream.cancel()
            await asyncio.gather(self._stream, return_exceptions=True)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        yield session


async def serve(start_gateway: Any, config: Path) -> GatewayProcess:
    port = free_port()
    return await start_gateway(config, port)


async def admin_reload(http: aiohttp.ClientSession, gateway: GatewayProcess) -> tuple[int, dict[str, Any]]:
    async with http.post(gateway.url("/admin/reload"), headers=ADMIN) as response:
        return response.status, await response.json()


async def logged(gateway: GatewayProcess, event: str, count: int = 1) -> dict[str, Any]:
    """The `count`-th log line named `event`, once the gateway has written it."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        found = [e for e in gateway.events() if e.get("event") == event]
        if len(found) >= count:
            return found[count - 1]
        await asyncio.sleep(0.1)
    pytest.fail(f"no {event!r} log line #{count}\n{gateway.output()}")


def child_marked(gateway: GatewayProcess, mark: str) -> int:
    """The pid of the gateway's stdio child started with MARK=`mark`."""
    for pid in gateway.tree():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"MARK={mark}".encode() in environ:
            return pid
    pytest.fail(f"no child with MARK={mark}")


async def metric(http: aiohttp.ClientSession, gateway: GatewayProcess, line_start: str) -> float:
    async with http.get(gateway.url("/metrics"), headers={"Authorization": f"Bearer {METRICS_TOKEN}"}) as response:
        text = await response.text()
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start)]
    assert values, f"no {line_start} in /metrics"
    return values[0]


async def test_sighup_adds_a_backend_and_an_open_session_hears_of_it(start_gateway: Any, tmp_path: Path,
                                                                     http: aiohttp.ClientSession) -> None:
    config = write_config(tmp_path / "gateway.yaml", backends=[calc("calc")])
    gateway = await serve(start_gateway, config)
    client = await Client(http, gateway.url()).open()
    before = await client.tools()
    assert "calc__add" in before and not any(name.startswith("more__") for name in before)
    kept = child_marked(gateway, "calc")

    write_config(config, backends=[calc("calc"), calc("more")])
    gateway.signal(signal.SIGHUP)
    await client.notified("notifications/tools/list_changed")

    assert {"more__add", "more__slow"} <= await client.tools()  # the session from before the reload
    reply = await client.call("more__add", a=2, b=3)
    assert reply["result"]["isError"] is False and "5" in reply["result"]["content"][0]["text"]
    assert child_marked(gateway, "calc") == kept, "an unchanged backend is kept, not restarted"
    reloaded = await logged(gateway, "config_reloaded")
    assert reloaded["trigger"] == "SIGHUP" and reloaded["backends"]["added"] == ["more"]
    assert await metric(http, gateway, 'mcpgw_config_reloads_total{outcome="applied"}') == 1
    await client.close()


async def test_a_removed_backend_finishes_its_call_in_flight_then_stops(start_gateway: Any, tmp_path: Path,
                                                                      http: aiohttp.ClientSession) -> None:
    config = write_config(tmp_path / "gateway.yaml", backends=[calc("calc"), calc("leaving")])
    gateway = await serve(start_gateway, config)
    client = await Client(http, gateway.url()).open()
    leaving = child_marked(gateway, "leaving")
    call = asyncio.create_task(client.call("leaving__slow", seconds=3, steps=3))
    await asyncio.sleep(1.0)  # the call is under way in the child

    write_config(config, backends=[calc("calc")])
    status, outcome = await admin_reload(http, gateway)
    assert status == 200, outcome
    assert outcome["status"] == "applied" and outcome["backends"]["removed"] == ["leaving"]
    assert not call.done(), "the reload does not wait for the call, nor cut it short"
    assert "leaving__slow" not in await client.tools()  # gone for new requests at once

    reply = await asyncio.wait_for(call, WAIT)
    assert reply["result"]["isError"] is False, reply
    assert reply["result"]["content"][0]["text"] == "slept 3s in 3 steps"
    assert await wait_gone([leaving]) == [], "the removed backend's process stops after its last call"
    retired = await logged(gateway, "backend_retired")
    assert retired["backend"] == "leaving" and retired["in_flight"] == 0
    assert (await client.call("calc__add", a=1, b=1))["result"]["isError"] is False
    await client.close()


async def test_a_changed_backend_is_replaced(start_gateway: Any, tmp_path: Path, http: aiohttp.ClientSession) -> None:
    config = write_config(tmp_path / "gateway.yaml", backends=[calc("calc")])
    gateway = await serve(start_gateway, config)
    client = await Client(http, gateway.url()).open()
    old = child_marked(gateway, "calc")

    write_config(config, backends=[calc("calc", namespace="math")])
    status, outcome = await admin_reload(http, gateway)
    assert status == 200 and outcome["backends"]["replaced"] == ["calc"], outcome
    await client.notified("notifications/tools/list_changed")
    tools = await client.tools()
    assert "math__add" in tools and "calc__add" not in tools
    assert (await client.call("math__add", a=1, b=2))["result"]["isError"] is False
    assert await wait_gone([old]) == [], "the replaced backend's old process stops"
    assert child_marked(gateway, "calc") != old
    await client.close()


async def test_a_tenants_new_allow_list_applies_and_its_clients_hear_of_it(start_gateway: Any, tmp_path: Path,
                                                                          http: aiohttp.ClientSession) -> None:
    config = write_config(tmp_path / "gateway.yaml", backends=[calc("calc")])
    gateway = await serve(start_gateway, config)
    client = await Client(http, gateway.url()).open()
    assert {"calc__add", "calc__multiply"} <= await client.tools()

    write_config(config, backends=[calc("calc")], allow=("calc__add",))
    gateway.signal(signal.SIGHUP)
    await client.notified("notifications/tools/list_changed")

    assert await client.tools() == {"calc__add"}
    refused = await client.call("calc__multiply", a=2, b=3)
    assert "Unknown tool" in refused["error"]["message"]
    assert (await logged(gateway, "config_reloaded"))["tenants_changed"] == ["acme"]
    await client.close()


async def test_a_rotated_api_key_works_from_the_next_request(start_gateway: Any, tmp_path: Path,
                                                             http: aiohttp.ClientSession) -> None:
    config = write_config(tmp_path / "gateway.yaml", backends=[calc("calc")])
    gateway = await serve(start_gateway, config)
    old = await Client(http, gateway.url()).open()

    write_config(config, backends=[calc("calc")], user_key="rotated-key")
    status, outcome = await admin_reload(http, gateway)
    assert status == 200 and outcome["backends"] == {"added": [], "removed": [], "replaced": []}, outcome

    status, reply = await old.post({"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
    assert status == 401, reply  # the old key, even on a session it opened
    new = await Client(http, gateway.url(), token="rotated-key").open()
    assert "calc__add" in await new.tools()
    await old.close()
    await new.close()


async def test_a_broken_config_keeps_the_old_one_serving(start_gateway: Any, tmp_path: Path,
                                                         http: aiohttp.ClientSession) -> None:
    config = write_config(tmp_path / "gateway.yaml", backends=[calc("calc")])
    gateway = await serve(start_gateway, config)
    client = await Client(http, gateway.url()).open()

    config.write_text(config.read_text() + "\ntenants: [\n", encoding="utf-8")  # not YAML
    status, outcome = await admin_reload(http, gateway)
    assert status == 422 and outcome["status"] == "rejected", outcome
    assert "not valid YAML" in outcome["reason"] and "\n" not in outcome["reason"]

    write_config(config, backends=[calc("calc"), {"name": "broken", "transport": "stdio",
                                                  "command": ["no-such-program-here"]}])
    gateway.signal(signal.SIGHUP)
    rejected = await logged(gateway, "config_reload_rejected", count=2)
    assert rejected["trigger"] == "SIGHUP" and "backends[1].command" in rejected["reason"], rejected
    assert rejected["level"] == "error"

    write_config(config, backends=[calc("calc")], server={"max_body_bytes": 2048})
    status, outcome = await admin_reload(http, gateway)
    assert status == 409 and outcome["reason"] == "server.max_body_bytes: cannot change without a restart", outcome

    assert (await client.call("calc__add", a=2, b=2))["result"]["isError"] is False  # the old config serves on
    assert await metric(http, gateway, 'mcpgw_config_reloads_total{outcome="rejected"}') == 3
    assert await metric(http, gateway, 'mcpgw_config_reloads_total{outcome="applied"}') == 0
    await client.close()


async def test_reloads_need_the_admin_scope(start_gateway: Any, tmp_path: Path, http: aiohttp.ClientSession) -> None:
    gateway = await serve(start_gateway, write_config(tmp_path / "gateway.yaml", backends=[calc("calc")]))
    async with http.post(gateway.url("/admin/reload"), headers={"Authorization": f"Bearer {USER_KEY}"}) as response:
        assert response.status == 403
    async with http.post(gateway.url("/admin/reload")) as response:
        assert response.status == 401
    assert not [e for e in gateway.events() if e.get("event") in ("config_reloaded", "config_reload_rejected")]


async def test_concurrent_reloads_run_one_after_the_other(start_gateway: Any, tmp_path: Path,
                                                          http: aiohttp.ClientSession) -> None:
    config = write_config(tmp_path / "gateway.yaml", backends=[calc("calc")])
    gateway = await serve(start_gateway, config)
    write_config(config, backends=[calc("calc"), calc("more")])
    replies = await asyncio.gather(*(admin_reload(http, gateway) for _ in range(3)))
    assert [status for status, _ in replies] == [200, 200, 200]
    added = sorted(outcome["backends"]["added"] for _, outcome in replies)
    assert added == [[], [], ["more"]], replies  # the first one added it; the others found nothing to do
    child_marked(gateway, "more")
    assert len([pid for pid in gateway.tree() if _is_calc(pid)]) == 2


def _children_marked(parent: int, mark: str) -> int:
    return sum(f"MARK={mark}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
               for pid in children_of(parent))


def _is_calc(pid: int) -> bool:
    try:
        return b"gateway.demo.calc" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


REDIS_URL = "redis://127.0.0.1:6379/0"


def _redis_up() -> bool:
    try:
        with socket.create_connection((HOST, 6379), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture
async def redis_prefix() -> AsyncIterator[str]:
    """A key prefix of this test's own, its keys deleted afterwards."""
    prefix = f"mcpgw-reload-{uuid.uuid4().hex[:8]}:"
    yield prefix
    client = redis.from_url(REDIS_URL)
    try:
        keys = [k async for k in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.mark.skipif(not _redis_up(), reason="Redis on 127.0.0.1:6379 is not running")
async def test_sighup_to_the_supervisor_reloads_every_worker(start_gateway: Any, tmp_path: Path, redis_prefix: str,
                                                             http: aiohttp.ClientSession) -> None:
    store = {"redis_url": REDIS_URL, "key_prefix": redis_prefix}
    config = write_config(tmp_path / "gateway.yaml", backends=[calc("calc")], store=store)
    port = free_port()
    gateway = await start_gateway(config, port, "--workers", "2")
    workers = children_of(gateway.pid)
    assert len(workers) == 2

    write_config(config, backends=[calc("calc"), calc("more")], store=store)
    gateway.signal(signal.SIGHUP)
    first, second = await logged(gateway, "config_reloaded"), await logged(gateway, "config_reloaded", count=2)
    assert first["backends"]["added"] == second["backends"]["added"] == ["more"]
    for worker in workers:  # each worker runs the new backend's child itself
        assert _children_marked(worker, "more") == 1
    for _ in range(4):  # new connections, spread over the workers by the kernel
        async with aiohttp.ClientSession() as fresh:
            client = await Client(fresh, gateway.url()).open()
            assert "more__add" in await client.tools()
            await client.close()
