"""A session's subscription is held by the replica that took the subscribe; its updates reach the
session's GET stream on whichever replica holds it, and a DELETE on any replica releases it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from conftest import RawClient, make_token

from shared_state.conftest import StartReplicas, needs_shared_redis
from shared_state.helpers import GetStream, wait_until

pytestmark = [pytest.mark.timeout(60), needs_shared_redis]

WATCHED = [sys.executable, str(Path(__file__).parents[1] / "e2e" / "watched_backend.py")]


async def _journal(client: RawClient) -> list[list[str]]:
    body = await client.call("tools/call", {"name": "w__journal", "arguments": {}})
    return list(json.loads(body["result"]["content"][0]["text"])["journal"])


async def test_an_update_taken_on_a_reaches_the_stream_on_b_and_a_delete_on_b_releases_it(
        replicas: StartReplicas, raw_client: Any) -> None:
    a, b = await replicas(2, [{"name": "w", "transport": "stdio", "command": WATCHED}])
    on_a: RawClient = raw_client(a.url, make_token("acme"))
    await on_a.initialize()
    on_b: RawClient = raw_client(b.url, on_a.token)
    on_b.session_id = on_a.session_id
    async with aiohttp.ClientSession() as http:
        stream = await GetStream(http, b.url, on_a.token or "", on_a.session_id or "").open()
        try:
            assert (await on_a.call("resources/subscribe", {"uri": "w+memo://a"}))["result"] == {}
            await on_a.call("tools/call", {"name": "w__touch", "arguments": {"uri": "memo://a", "text": "x"}})
            event = await stream.next(10.0)
            assert orjson.loads(event.data) == {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                                                "params": {"uri": "w+memo://a"}}
        finally:
            await stream.close()
    async with on_b.session.delete(on_b.url, headers=on_b.headers()) as response:
        assert response.status == 204
    observer: RawClient = raw_client(a.url, make_token("acme"))
    await observer.initialize()

    async def released() -> bool:
        return await _journal(observer) == [["subscribe", "memo://a"], ["unsubscribe", "memo://a"]]

    assert await wait_until(released, 10.0, interval=0.2)
