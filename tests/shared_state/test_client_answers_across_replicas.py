"""A client's answer to the gateway's question may reach another replica than the one that asked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from backend_fixtures import StartBackend
from conftest import RawClient, http_backend_config, make_token

from gateway.protocol.sse import SseDecoder
from shared_state.conftest import StartReplicas, needs_shared_redis

pytestmark = [pytest.mark.timeout(60), needs_shared_redis]


async def messages(client: RawClient, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """POST `body` and yield the messages of its SSE reply as they come."""
    decoder = SseDecoder()
    async with client.session.post(client.url, data=orjson.dumps(body), headers=client.headers()) as response:
        assert response.content_type == "text/event-stream"
        async for chunk in response.content.iter_any():
            for event in decoder.feed(chunk):
                if event.data:
                    yield orjson.loads(event.data)


async def test_an_elicitation_asked_on_a_is_answered_through_b(
        replicas: StartReplicas, raw_client: Any, http_backend: StartBackend) -> None:
    assistant = await http_backend("assistant")
    a, b = await replicas(2, [http_backend_config("web", assistant.url)])
    on_a: RawClient = raw_client(a.url, make_token("acme"))
    status, _, headers = await on_a.post(on_a.request("initialize", {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "t", "version": "1"}}))
    assert status == 200
    on_a.session_id = headers["Mcp-Session-Id"]
    await on_a.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    on_b: RawClient = raw_client(b.url, on_a.token)
    on_b.session_id = on_a.session_id

    seen: list[dict[str, Any]] = []
    call = on_a.request("tools/call", {"name": "web__confirm", "arguments": {"action": "ship it"}})
    async for message in messages(on_a, call):
        seen.append(message)
        if message.get("method") == "elicitation/create":
            answer = {"jsonrpc": "2.0", "id": message["id"],
                      "result": {"action": "accept", "content": {"confirm": True, "note": "via b"}}}
            status, _, _ = await on_b.post(answer)
            assert status == 202
    assert seen[0]["params"]["message"] == "Do you want to ship it?"
    assert seen[-1]["id"] == call["id"]
    assert seen[-1]["result"]["content"][0]["text"] == "confirmed=True note=via b"
