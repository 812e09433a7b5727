"""`mcp-gateway serve --workers N`: forked workers on one port, supervised and stopped together."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import os
import signal
import socket
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from lifecycle.processes import (
    API_KEY,
    HOST,
    MCP_HEADERS,
    GatewayProcess,
    children_of,
    free_port,
    gateway_config,
    initialize,
    socket_owner,
    wait_gone,
)

pytestmark = [pytest.mark.timeout(90), pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs /proc")]

REDIS_URL = "redis://127.0.0.1:6379/0"
MAX_CONNECTIONS = 200


def _redis_up() -> bool:
    try:
        with socket.create_connection((HOST, 6379), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


SCRAPE_TOKEN = "workers-scrape-token-0123456789"
SCRAPE = {"Authorization": f"Bearer {SCRAPE_TOKEN}"}


def _redis_config(tmp_path: Path, port: int) -> Path:
    store = {"redis_url": REDIS_URL, "key_prefix": f"mcpgw-test-{uuid.uuid4().hex[:8]}:"}
    return gateway_config(tmp_path, port=port, grace=5.0, store=store, metrics={"token": SCRAPE_TOKEN})


def _healthz_owner(port: int, workers: list[int]) -> int | None:
    """GET /healthz on a new connection; which worker process answered it."""
    with socket.create_connection((HOST, port), timeout=5) as sock:
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: {HOST}:{port}\r\n\r\n".encode())
        head = sock.recv(4096)
        assert head.startswith(b"HTTP/1.1 200"), head
        return socket_owner(sock, workers)  # asked while the connection is still open


async def test_more_than_one_worker_without_redis_is_refused(start_gateway: Any, tmp_path: Path) -> None:
    port = free_port()
    gateway = await start_gateway(gateway_config(tmp_path, port=port), port, "--workers", "2", ready=False)
    await gateway.expect_exit(2)
    assert "store.redis_url" in gateway.output()


@pytest.mark.skipif(not _redis_up(), reason="Redis on 127.0.0.1:6379 is not running")
async def test_two_workers_answer_on_one_port_and_sigterm_stops_them_all(start_gateway: Any, tmp_path: Path) -> None:
    port = free_port()
    gateway: GatewayProcess = await start_gateway(_redis_config(tmp_path, port), port, "--workers", "2")
    workers = children_of(gateway.pid)
    assert len(workers) == 2
    everything = gateway.tree()  # the workers and each one's stdio children
    assert len(everything) >= 4

    answered: set[int | None] = set()
    for _ in range(MAX_CONNECTIONS):
        answered.add(await asyncio.to_thread(_healthz_owner, port, workers))
        if answered >= set(workers):
            break
    assert answered == set(workers), "both workers should accept connections on the shared port"

    gateway.signal(signal.SIGTERM)
    await gateway.expect_exit(0)
    assert await wait_gone(everything) == []
    assert len([e for e in gateway.events() if e.get("event") == "gateway_stopped"]) == 2


def _shared_sessions() -> bool:
    """Whether a Redis-backed session store exists yet (another part of the project)."""
    sessions = importlib.import_module("gateway.transport.sessions")
    return any(name.startswith("Redis") for name in dir(sessions))


@pytest.mark.skipif(not _redis_up(), reason="Redis on 127.0.0.1:6379 is not running")
@pytest.mark.skipif(not _shared_sessions(), reason="the Redis session store is not implemented yet")
async def test_a_session_works_on_every_worker(start_gateway: Any, tmp_path: Path) -> None:
    port = free_port()
    gateway = await start_gateway(_redis_config(tmp_path, port), port, "--workers", "2")
    async with aiohttp.ClientSession() as opener:
        session_id = await initialize(opener, gateway.url())
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    headers = {**MCP_HEADERS, "Mcp-Session-Id": session_id}
    for _ in range(20):  # a new connection each time, so both workers get some
        async with aiohttp.ClientSession() as session, \
                session.post(gateway.url(), data=body, headers=headers) as response:
            assert response.status == 200
            assert any(t["name"] == "calc__add" for t in (await response.json())["result"]["tools"])
    gateway.signal(signal.SIGTERM)
    await gateway.expect_exit(0)


@pytest.mark.skipif(not _redis_up(), reason="Redis on 127.0.0.1:6379 is not running")
async def test_metrics_add_up_every_workers_requests(start_gateway: Any, tmp_path: Path) -> None:
    """Workers hold hot-path updates briefly, then flush them to the shared files (FLUSH_SECONDS)."""
    port = free_port()
    gateway = await start_gateway(_redis_config(tmp_path, port), port, "--workers", "2")
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    async with aiohttp.ClientSession() as opener:
        session_id = await initialize(opener, gateway.url())
    calls = 20  # a new connection each time, so both workers get some
    for _ in range(calls):
        async with aiohttp.ClientSession() as http, \
                http.post(gateway.url(), data=body, headers={**MCP_HEADERS, "Mcp-Session-Id": session_id}) as reply:
            assert reply.status == 200
    counted = 0.0
    async with aiohttp.ClientSession() as http:
        for _ in range(50):  # up to 5 s: well past FLUSH_SECONDS
            async with http.get(gateway.url("/metrics"), headers=SCRAPE) as response:
                text = await response.text()
            counted = sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                          if s.name == "mcpgw_requests_total" and s.labels["method"] == "tools/list")
            if counted == calls:
                break
            await asyncio.sleep(0.1)
    assert counted == calls
    gateway.signal(signal.SIGTERM)
    await gateway.expect_exit(0)


@pytest.mark.skipif(not _redis_up(), reason="Redis on 127.0.0.1:6379 is not running")
async def test_the_status_page_counts_every_workers_calls_and_sees_each_worker(start_gateway: Any,
                                                                             tmp_path: Path) -> None:
    """In multiprocess mode the traffic window reads what a scrape renders: every worker's files."""
    port, admin = free_port(), "workers-admin-key"
    keys = [{"sha256": hashlib.sha256(key.encode()).hexdigest(), "tenant": "acme", "subject": "lifecycle",
             "scopes": scopes} for key, scopes in ((API_KEY, []), (admin, ["mcpgw:admin"]))]
    config = gateway_config(tmp_path, port=port, grace=5.0, auth={"api_keys": keys}, metrics={"token": SCRAPE_TOKEN},
                            store={"redis_url": REDIS_URL, "key_prefix": f"mcpgw-test-{uuid.uuid4().hex[:8]}:"})
    gateway = await start_gateway(config, port, "--workers", "2")
    async with aiohttp.ClientSession() as opener:
        session_id = await initialize(opener, gateway.url())
    calls = 12
    for n in range(calls):  # a new connection each time, so both workers get some
        body = orjson.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                             "params": {"name": "calc__add", "arguments": {"a": n, "b": 1}}})
        async with aiohttp.ClientSession() as http, \
                http.post(gateway.url(), data=body, headers={**MCP_HEADERS, "Mcp-Session-Id": session_id}) as reply:
            assert reply.status == 200
    headers = {"Authorization": f"Bearer {admin}"}
    async with aiohttp.ClientSession() as http:
        for _ in range(50):  # the other worker hands its counts over within FLUSH_SECONDS
            async with http.get(gateway.url("/admin/backends"), headers=headers) as response:
                assert response.status == 200
                [calc] = (await response.json())["backends"]
            if calc["traffic"]["calls"] == calls:
                break
            await asyncio.sleep(0.1)
        assert (calc["traffic"]["calls"], calc["traffic"]["totals"]["calls"]) == (calls, calls)
        async with http.get(gateway.url("/metrics"), headers=SCRAPE) as response:
            text = await response.text()
        counted = sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                      if s.name == "mcpgw_tool_calls_total" and s.labels["backend"] == "calc")
        assert counted == calls
        async with http.get(gateway.url("/admin/replicas"), headers=headers) as response:
            seen = await response.json()
    assert sorted(r["pid"] for r in seen["replicas"]) == sorted(children_of(gateway.pid))
    assert seen["config_versions"] == 1
    gateway.signal(signal.SIGTERM)
    await gateway.expect_exit(0)


@pytest.mark.skipif(not _redis_up(), reason="Redis on 127.0.0.1:6379 is not running")
async def test_a_worker_dying_right_after_start_stops_the_rest_instead_of_looping(
        start_gateway: Any, tmp_path: Path) -> None:
    port = free_port()
    gateway = await start_gateway(_redis_config(tmp_path, port), port, "--workers", "2")
    everything = gateway.tree()
    os.kill(children_of(gateway.pid)[0], signal.SIGKILL)
    await gateway.expect_exit(1)
    assert await wait_gone(everything) == []
    assert gateway.event("workers_crash_loop")


@pytest.mark.skipif(not _redis_up(), reason="Redis on 127.0.0.1:6379 is not running")
async def test_workers_whose_parent_is_killed_drain_and_exit(start_gateway: Any, tmp_path: Path) -> None:
    port = free_port()
    gateway = await start_gateway(_redis_config(tmp_path, port), port, "--workers", "2")
    everything = gateway.tree()
    gateway.signal(signal.SIGKILL)
    await gateway.expect_exit(-signal.SIGKILL)
    assert await wait_gone(everything, timeout=15) == [], "orphaned workers must not live on"
