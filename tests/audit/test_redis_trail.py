"""The audit trail in a Redis Stream: one record per call, none twice, none lost across a Redis restart.

Issue 29, "Done when": under a few hundred calls the stream holds exactly one record per call with the
right subject and outcome; with `policy: block` a Redis restart in the middle loses none (the calls wait
instead); `audit verify --redis` passes, and `audit tail` filters by tenant and subject. The restarted
Redis is a private `redis-server` with an append-only file; the shared one is only read and written
under a key prefix of this test's own.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import yaml
from conftest import JWT_SECRET, StartGateway, make_config, make_token, sdk_client, stdio_backend
from shared_state.helpers import HOST, REDIS_SERVER, SHARED_REDIS_URL, RedisServer, wait_until

from gateway.audit.chain import Chain
from gateway.audit.record import admin_record
from gateway.audit.redis_sink import RedisSink
from gateway.cli import main

pytestmark = [pytest.mark.timeout(180), pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server missing")]

HMAC_KEY = "redis-audit-test-key-0123456789abcdef"


class DurableRedis(RedisServer):
    """A private redis-server that keeps what it was given across a restart (AOF, fsync on every write)."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            str(REDIS_SERVER), "--port", str(self.port), "--bind", HOST, "--save", "", "--appendonly", "yes",
            "--appendfsync", "always", "--dir", str(self.folder),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        assert await wait_until(self.answers, 10.0), f"redis-server did not start on {self.port}"


@pytest.fixture
async def shared_prefix() -> Any:
    """A key prefix of this test's own on the shared Redis, emptied afterwards."""
    prefix = f"mcpgw-audit-test-{secrets.token_hex(4)}:"
    yield prefix
    client = aioredis.Redis.from_url(SHARED_REDIS_URL)
    keys = [key async for key in client.scan_iter(match=prefix + "*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


async def read_stream(url: str, key: str) -> list[dict[str, Any]]:
    client = aioredis.Redis.from_url(url)
    try:
        return [json.loads(fields[b"r"]) for _, fields in await client.xrange(key)]
    finally:
        await client.aclose()


async def calls(url: str, subject: str, count: int) -> None:
    async with sdk_client(url, make_token("acme", sub=subject)) as client:
        for n in range(count):
            assert not (await client.call_tool("calc__add", {"a": n, "b": 2})).is_error


def cli_config(tmp_path: Path, store: dict[str, Any], audit: dict[str, Any]) -> str:
    path = tmp_path / "cli.yaml"
    path.write_text(yaml.safe_dump({"auth": {"jwt": {"secret": JWT_SECRET}}, "backends": [], "store": store,
                                    "tenants": {"acme": {"backends": ["*"]}}, "audit": audit}))
    return str(path)


async def test_hundreds_of_calls_leave_one_record_each_in_the_stream(
        gateway: StartGateway, tmp_path: Path, shared_prefix: str, capsys: pytest.CaptureFixture[str]) -> None:
    store = {"redis_url": SHARED_REDIS_URL, "key_prefix": shared_prefix}
    audit = {"enabled": True, "redis": True, "hmac_key": HMAC_KEY}
    running = await gateway(make_config([stdio_backend("calc")], store=store, audit=audit))
    per_client = 120
    await asyncio.gather(calls(running.url, "erin", per_client), calls(running.url, "finn", per_client))
    key = shared_prefix + "audit"

    async def all_there() -> bool:
        return len(await read_stream(SHARED_REDIS_URL, key)) >= 2 * per_client
    assert await wait_until(all_there, 10)
    found = await read_stream(SHARED_REDIS_URL, key)
    assert len(found) == 2 * per_client and len({r["request_id"] for r in found}) == len(found)
    assert sorted(r["subject"] for r in found) == ["erin"] * per_client + ["finn"] * per_client
    assert {(r["tenant"], r["method"], r["outcome"]) for r in found} == {("acme", "tools/call", "ok")}

    config = cli_config(tmp_path, store, audit)
    assert await asyncio.to_thread(main, ["audit", "verify", "--redis", "--config", config]) == 0
    assert f"ok: {2 * per_client} records in 1 chains" in capsys.readouterr().out
    tail = ["audit", "tail", "--subject", "finn", "--since", "10m", "--json", "--config", config]
    assert await asyncio.to_thread(main, tail) == 0
    tailed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(tailed) == per_client and {r["subject"] for r in tailed} == {"finn"}
    assert await asyncio.to_thread(main, ["audit", "tail", "--tenant", "acme", "--last", "3", "--config", config]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all(" acme/" in line and "tools/call calc__add [calc add] -> ok" in line
                                   for line in lines)


async def test_none_is_lost_or_doubled_across_a_redis_restart_under_block(gateway: StartGateway,
                                                                          tmp_path: Path) -> None:
    redis = DurableRedis(tmp_path)
    await redis.start()
    try:
        audit = {"enabled": True, "redis": True, "redis_url": redis.url, "policy": "block", "queue_size": 5,
                 "hmac_key": HMAC_KEY}
        running = await gateway(make_config([stdio_backend("calc")], audit=audit))
        total = 150
        load = asyncio.create_task(calls(running.url, "gwen", total))
        key = "mcpgw:audit"

        async def some_written() -> bool:
            return len(await read_stream(redis.url, key)) >= 30
        assert await wait_until(some_written, 30)
        await redis.stop()  # an outage in the middle of the load: the calls wait once the queues are full
        await asyncio.sleep(1.5)
        assert not load.done()
        await redis.start()
        await asyncio.wait_for(load, 60)

        async def all_there() -> bool:
            return len(await read_stream(redis.url, key)) >= total
        assert await wait_until(all_there, 15)
        found = await read_stream(redis.url, key)
        assert len(found) == total and [r["seq"] for r in found] == list(range(total))
        assert {r["subject"] for r in found} == {"gwen"}
        assert await asyncio.to_thread(main, ["audit", "verify", "--redis", "--config",
                     cli_config(tmp_path, {"redis_url": None}, audit)]) == 0
    finally:
        await redis.stop()


async def test_a_batch_sent_again_adds_nothing_twice(shared_prefix: str) -> None:
    chain, key = Chain(HMAC_KEY.encode()), shared_prefix + "again"
    batch = [chain.seal(admin_record(1.0, "admin/reload", tenant=None, subject=None, request_id=None,
                                     outcome="applied")) for _ in range(3)]
    sink = RedisSink(aioredis.Redis.from_url(SHARED_REDIS_URL), key, max_len=1000)
    await sink.write(batch[:2])
    await sink.write(batch)  # the first two again (their reply was lost), and one new
    await sink.close()
    assert [r["seq"] for r in await read_stream(SHARED_REDIS_URL, key)] == [0, 1, 2]
