"""Sentinel, Cluster and unix-socket URLs against private servers: replicas share sessions through them."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from backend_fixtures import HOST, free_port
from conftest import RawClient, StartGateway, make_config, make_token, stdio_backend

from gateway.store.client import create_client
from shared_state.conftest import needs_redis_server, store_config
from shared_state.helpers import REDIS_SERVER, RedisServer, wait_until

pytestmark = [pytest.mark.timeout(90), needs_redis_server]


class Processes:
    """Redis processes of one test, stopped at its end."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.running: list[asyncio.subprocess.Process] = []

    async def spawn(self, *args: str) -> None:
        assert REDIS_SERVER
        process = await asyncio.create_subprocess_exec(REDIS_SERVER, *args, cwd=self.directory,
                                                       stdout=asyncio.subprocess.DEVNULL,
                                                       stderr=asyncio.subprocess.DEVNULL)
        self.running.append(process)

    async def stop(self) -> None:
        for process in self.running:
            if process.returncode is None:
                process.terminate()
                await process.wait()


@pytest.fixture
async def processes(tmp_path: Path) -> AsyncIterator[Processes]:
    started = Processes(tmp_path)
    yield started
    await started.stop()


def cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) exists and is free too."""
    while True:
        port = free_port()
        if port + 10000 < 65536:
            with contextlib.suppress(OSError), socket.socket() as sock:
                sock.bind((HOST, port + 10000))
                return port


async def answers(client: Any) -> bool:
    with contextlib.suppress(Exception):
        return bool(await client.set("probe", "1")) and await client.get("probe") == b"1"
    return False


async def sessions_are_shared(gateway: StartGateway, raw_client: Any, url: str) -> None:
    """Two replicas on `url`: a session opened on one works on the other; a DELETE ends it on both."""
    config = make_config([stdio_backend("calc")], store=store_config(url, "mcpgw-topology:", required=True))
    a, b = await gateway(config), await gateway(config)
    leader: RawClient = raw_client(a.url, make_token("acme"))
    await leader.initialize()
    other: RawClient = raw_client(b.url, leader.token)
    other.session_id = leader.session_id
    assert (await other.call("ping"))["result"] == {}
    async with aiohttp.ClientSession() as http, http.get(f"{b.base}readyz") as response:
        assert response.status == 200
    async with other.session.delete(other.url, headers=other.headers()) as response:
        assert response.status == 204

    async def ended_on_a() -> bool:  # a cluster relays PUBLISH between nodes: a few ms later
        return (await leader.post(leader.request("ping")))[0] == 404

    assert await wait_until(ended_on_a, 1.0)  # the contract: within a second


async def test_a_sentinel_url_finds_the_master_and_replicas_share_sessions(
        processes: Processes, gateway: StartGateway, raw_client: Any, tmp_path: Path) -> None:
    master = RedisServer()
    await master.start()
    try:
        sentinel_port = free_port()
        conf = tmp_path / "sentinel.conf"
        conf.write_text(f"port {sentinel_port}\nbind {HOST}\nsentinel monitor mymaster {HOST} {master.port} 1\n")
        await processes.spawn(str(conf), "--sentinel")
        client = create_client(f"redis+sentinel://{HOST}:{sentinel_port}/mymaster")
        try:
            assert await wait_until(lambda: answers(client), 10)
        finally:
            await client.aclose()
        await sessions_are_shared(gateway, raw_client, f"redis+sentinel://{HOST}:{sentinel_port}/mymaster")
    finally:
        await master.stop()


async def test_a_cluster_url_works_with_keys_spread_over_three_masters(
        processes: Processes, gateway: StartGateway, raw_client: Any, tmp_path: Path) -> None:
    ports = [cluster_port() for _ in range(3)]
    for port in ports:
        node = tmp_path / str(port)
        node.mkdir()
        await processes.spawn("--port", str(port), "--bind", HOST, "--cluster-enabled", "yes", "--save", "",
                              "--appendonly", "no", "--cluster-config-file", str(node / "nodes.conf"),
                              "--dir", str(node))
    for port in ports:
        assert await wait_until(lambda p=port: RedisServer(p).answers(), 10)
    create = await asyncio.create_subprocess_exec(
        "redis-cli", "--cluster", "create", *(f"{HOST}:{p}" for p in ports), "--cluster-yes",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    assert await create.wait() == 0
    url = f"redis+cluster://{HOST}:{ports[0]},{HOST}:{ports[1]}"
    client = create_client(url)
    try:
        assert await wait_until(lambda: answers(client), 15)
    finally:
        await client.aclose()
    await sessions_are_shared(gateway, raw_client, url)


async def test_a_unix_socket_url_works(processes: Processes, gateway: StartGateway, raw_client: Any,
                                       tmp_path: Path) -> None:
    path = tmp_path / "redis.sock"
    await processes.spawn("--port", "0", "--unixsocket", str(path), "--save", "", "--appendonly", "no")
    url = f"unix://{path}?db=2"
    client = create_client(url)
    try:
        assert await wait_until(lambda: answers(client), 10)
    finally:
        await client.aclose()
    await sessions_are_shared(gateway, raw_client, url)
