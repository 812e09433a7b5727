"""Fixtures for shared-state tests: replicas of the gateway on one Redis, and Redis servers.

Tests use the Redis at 127.0.0.1:6379 with a unique key prefix each (deleted after), or,
when they stop Redis, a private `redis-server` of their own on a free port.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis
from conftest import RunningGateway, StartGateway, make_config

from shared_state.helpers import REDIS_SERVER, SHARED_REDIS_URL, RedisServer

StartReplicas = Callable[..., Awaitable[list[RunningGateway]]]


def _shared_redis_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


needs_shared_redis = pytest.mark.skipif(not _shared_redis_up(), reason="Redis on 127.0.0.1:6379 is not running")
needs_redis_server = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")


@pytest.fixture
async def redis_prefix() -> AsyncIterator[str]:
    """A key prefix for one test; every key under it is deleted afterwards."""
    prefix = f"mcpgw-test-{uuid.uuid4().hex}:"
    yield prefix
    client = aioredis.Redis.from_url(SHARED_REDIS_URL)
    try:
        async for key in client.scan_iter(match=f"{prefix}*"):
            await client.delete(key)
    finally:
        await client.aclose()


@pytest.fixture
async def shared_redis(redis_prefix: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(SHARED_REDIS_URL)
    yield client
    await client.aclose()


@pytest.fixture
async def private_redis() -> AsyncIterator[Callable[[], Awaitable[RedisServer]]]:
    """`await private_redis()`: a started redis-server of this test's own; all are stopped after."""
    servers: list[RedisServer] = []

    async def start() -> RedisServer:
        server = RedisServer()
        servers.append(server)
        await server.start()
        return server

    yield start
    for server in servers:
        await server.stop()


def store_config(url: str, prefix: str, *, required: bool = False) -> dict[str, Any]:
    return {"redis_url": url, "key_prefix": prefix, "required": required}


@pytest.fixture
async def replicas(redis_prefix: str, gateway: StartGateway) -> StartReplicas:
    """`await replicas(n, backends, tenants=..., **sections)`: n gateway apps sharing one Redis store.

    Requested after `redis_prefix`, so every app is stopped before the prefix's keys are deleted.
    """

    async def start(count: int, backends: list[dict[str, Any]], *, redis_url: str = SHARED_REDIS_URL,
                    required: bool = False, **sections: Any) -> list[RunningGateway]:
        config = make_config(backends, store=store_config(redis_url, redis_prefix, required=required), **sections)
        return [await gateway(config) for _ in range(count)]

    return start
