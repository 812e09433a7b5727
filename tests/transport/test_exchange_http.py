"""The exchange core over HTTP: the client channels of a session and of a POST, through the real app."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest
from conftest import RawClient, StartGateway, make_config, make_token, stdio_backend

from gateway import keys
from gateway.protocol.sse import SseDecoder
from gateway.transport.channel import ChannelClosed

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def started(gateway: StartGateway, raw_client: Any) -> tuple[Any, RawClient]:
    running = await gateway(make_config([stdio_backend("calc")]))
    client = raw_client(running.url, make_token("acme"))
    await client.initialize()
    return running, client


async def _first_event(response: aiohttp.ClientResponse) -> dict[str, Any]:
    decoder = SseDecoder()
    async for chunk in response.content.iter_any():
        for event in decoder.feed(chunk):
            if event.data:
                return orjson.loads(event.data)
    raise AssertionError("the stream ended without an event")


async def test_the_gateway_asks_a_client_on_its_get_stream_and_gets_the_answer_of_its_post(
        started: tuple[Any, RawClient]) -> None:
    running, client = started
    channel = running.app[keys.ENDPOINT].session_channel(client.session_id)
    headers = client.headers(Accept="text/event-stream")
    async with client.session.get(client.url, headers=headers) as stream:
        assert stream.status == 200
        asking = asyncio.create_task(channel.ask("roots/list", None, timeout=10))
        request = await asyncio.wait_for(_first_event(stream), 10)
        assert request["method"] == "roots/list"
        status, _, _ = await client.post({"jsonrpc": "2.0", "id": request["id"], "result": {"roots": []}})
        assert status == 202
        assert (await asking)["result"] == {"roots": []}


async def test_an_answer_from_another_session_does_not_reach_the_ask(
        started: tuple[Any, RawClient], raw_client: Any) -> None:
    running, client = started
    intruder = raw_client(client.url, make_token("acme", sub="someone-else"))
    await intruder.initialize()
    channel = running.app[keys.ENDPOINT].session_channel(client.session_id)
    async with client.session.get(client.url, headers=client.headers(Accept="text/event-stream")) as stream:
        asking = asyncio.create_task(channel.ask("roots/list", None, timeout=0.5))
        request = await asyncio.wait_for(_first_event(stream), 10)
        status, _, _ = await intruder.post({"jsonrpc": "2.0", "id": request["id"], "result": {"roots": ["x"]}})
        assert status == 202  # accepted and ignored: it answers nothing of the intruder's session
        with pytest.raises(TimeoutError):
            await asking


async def test_a_session_without_a_get_stream_cannot_be_asked(started: tuple[Any, RawClient]) -> None:
    running, client = started
    channel = running.app[keys.ENDPOINT].session_channel(client.session_id)
    with pytest.raises(ChannelClosed):
        await channel.ask("roots/list", None, timeout=5)


async def test_ending_the_session_fails_the_asks_waiting_on_it(started: tuple[Any, RawClient]) -> None:
    running, client = started
    channel = running.app[keys.ENDPOINT].session_channel(client.session_id)
    async with client.session.get(client.url, headers=client.headers(Accept="text/event-stream")) as stream:
        asking = asyncio.create_task(channel.ask("roots/list", None, timeout=30))
        await asyncio.wait_for(_first_event(stream), 10)
        async with client.session.delete(client.url, headers=client.headers()) as deleted:
            assert deleted.status == 204
        with pytest.raises(ChannelClosed):
            await asking


async def test_a_progress_request_is_answered_as_a_stream_of_progress_then_the_result(
        started: tuple[Any, RawClient]) -> None:
    _, client = started
    call = client.request("tools/call", {"name": "calc__slow", "arguments": {"seconds": 0.2, "steps": 2},
                                         "_meta": {"progressToken": "p1"}})
    async with client.session.post(client.url, data=orjson.dumps(call), headers=client.headers()) as response:
        assert response.content_type == "text/event-stream"
        decoder, messages = SseDecoder(), []
        async for chunk in response.content.iter_any():
            messages += [orjson.loads(e.data) for e in decoder.feed(chunk) if e.data]
    assert [m.get("method") for m in messages[:-1]] == ["notifications/progress"] * 2
    assert {m["params"]["progressToken"] for m in messages[:-1]} == {"p1"}
    assert messages[-1]["id"] == call["id"] and not messages[-1]["result"]["isError"]


async def test_a_plain_request_is_answered_with_one_json_body(started: tuple[Any, RawClient]) -> None:
    _, client = started
    status, body, headers = await client.post(client.request("tools/call", {
        "name": "calc__evaluate", "arguments": {"expression": "6 * 7"}}))
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert body["result"]["content"][0]["text"] == "42.0"
