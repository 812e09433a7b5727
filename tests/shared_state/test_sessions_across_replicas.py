"""Sessions in Redis: opened on one replica, used on any other, ended everywhere by one DELETE."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from conftest import MCP_HEADERS, RawClient, make_token, stdio_backend

from shared_state.conftest import StartReplicas, needs_shared_redis
from shared_state.helpers import GetStream, wait_until

pytestmark = [pytest.mark.timeout(60), needs_shared_redis]


def follower(raw_client: Any, url: str, leader: RawClient) -> RawClient:
    """A client on another replica that uses `leader`'s session."""
    client: RawClient = raw_client(url, leader.token)
    client.session_id = leader.session_id
    return client


async def delete(client: RawClient) -> int:
    async with client.session.delete(client.url, headers=client.headers()) as response:
        return response.status


async def test_a_session_opened_on_a_is_used_on_b_and_a_delete_on_b_ends_it_on_a(
        replicas: StartReplicas, raw_client: Any) -> None:
    a, b = await replicas(2, [stdio_backend("calc")])
    on_a: RawClient = raw_client(a.url, make_token("acme"))
    await on_a.initialize()
    on_b = follower(raw_client, b.url, on_a)

    tools = await on_b.call("tools/list")
    assert "calc__add" in {t["name"] for t in tools["result"]["tools"]}
    called = await on_b.call("tools/call", {"name": "calc__add", "arguments": {"a": 2, "b": 3}})
    assert called["result"]["isError"] is False and "5" in called["result"]["content"][0]["text"]

    assert await delete(on_b) == 204
    status, _, _ = await on_b.post(on_b.request("ping"))
    assert status == 404

    async def ended_on_a() -> bool:  # a's cached copy goes when the session_ended message arrives
        status, _, _ = await on_a.post(on_a.request("ping"))
        return status == 404

    assert await wait_until(ended_on_a, within=2.0)


async def test_a_session_is_refused_on_another_replica_to_another_subject_or_tenant(
        replicas: StartReplicas, raw_client: Any) -> None:
    every = {"backends": ["*"]}
    a, b = await replicas(2, [stdio_backend("calc")], tenants={"acme": every, "other": every})
    on_a: RawClient = raw_client(a.url, make_token("acme", sub="alice"))
    await on_a.initialize()
    for token in (make_token("acme", sub="mallory"), make_token("other", sub="alice")):
        thief: RawClient = raw_client(b.url, token)
        thief.session_id = on_a.session_id
        status, _, _ = await thief.post(thief.request("ping"))
        assert status == 404
    assert (await follower(raw_client, b.url, on_a).call("ping"))["result"] == {}


async def test_a_delete_on_b_closes_the_get_stream_held_on_a(replicas: StartReplicas, raw_client: Any) -> None:
    a, b = await replicas(2, [stdio_backend("calc")])
    token = make_token("acme")
    on_a: RawClient = raw_client(a.url, token)
    await on_a.initialize()
    async with aiohttp.ClientSession() as http:
        stream = await GetStream(http, a.url, token, on_a.session_id or "").open()
        try:
            assert await delete(follower(raw_client, b.url, on_a)) == 204
            await asyncio.wait_for(stream.ended.wait(), 1.0)
        finally:
            await stream.close()


async def test_an_unknown_session_is_404_on_every_replica_and_a_missing_one_400(
        replicas: StartReplicas, raw_client: Any) -> None:
    a, b = await replicas(2, [stdio_backend("calc")])
    for running in (a, b):
        client: RawClient = raw_client(running.url, make_token("acme"))
        assert (await client.post(client.request("ping")))[0] == 400
        client.session_id = "no-such-session"
        assert (await client.post(client.request("ping")))[0] == 404
        client.session_id = "x" * 5000  # never looked up in Redis
        assert (await client.post(client.request("ping")))[0] == 404


async def test_the_session_key_expires_when_idle_and_is_a_tombstone_after_delete(
        replicas: StartReplicas, raw_client: Any, shared_redis: aioredis.Redis, redis_prefix: str) -> None:
    (a,) = await replicas(1, [stdio_backend("calc")])
    client: RawClient = raw_client(a.url, make_token("acme"))
    await client.initialize()
    key = f"{redis_prefix}session:{client.session_id}"
    assert 0 < await shared_redis.pttl(key) <= 3600 * 1000
    assert await delete(client) == 204
    assert await shared_redis.get(key) == b"ended"
    assert await shared_redis.pttl(key) > 0
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {client.token}", "Mcp-Session-Id": client.session_id or ""}
    async with client.session.get(a.url, headers=headers) as response:
        assert response.status == 404
