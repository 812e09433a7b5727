"""Upstreams hand a backend's requests to the call they belong to, and refuse those that belong to none."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from gateway.upstream import HttpUpstream, UpstreamError
from gateway.upstream.base import Answer, JsonObject
from upstream.stdio_fixtures import MakeStdio
from upstream.test_http import FakeBackend, MakeHttp, event, fake, make_http, result_for, sse  # noqa: F401 - fixtures
from upstream.test_stdio import SCRIPTED

SAMPLING = "sampling/createMessage"


class Handler:
    """A call's `on_request`: records what it is given and answers it a moment later."""

    def __init__(self, result: JsonObject) -> None:
        self.result = result
        self.requests: list[JsonObject] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, request: JsonObject, answer: Answer) -> None:
        self.requests.append(request)
        task = asyncio.create_task(self._answer(request, answer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, request: JsonObject, answer: Answer) -> None:
        await asyncio.sleep(0.05)
        await answer({"jsonrpc": "2.0", "id": request["id"], "result": self.result})


async def _posted_reply(fake: FakeBackend, request_id: Any, within: float = 5.0) -> JsonObject:  # noqa: F811
    async with asyncio.timeout(within):
        while True:
            replies = [s for s in fake.seen if s.method == "POST" and s.body.get("id") == request_id
                       and "method" not in s.body]
            if replies:
                return replies[0].body | {"session": replies[0].headers.get("Mcp-Session-Id")}
            await asyncio.sleep(0.02)


async def test_a_request_on_the_calls_stream_goes_to_its_handler_and_back_under_the_backends_id(
        fake: FakeBackend, make_http: MakeHttp) -> None:  # noqa: F811
    async def answer(request: web.Request, body: JsonObject) -> web.StreamResponse:
        ask = {"jsonrpc": "2.0", "id": "srv-1", "method": SAMPLING, "params": {"maxTokens": 5}}
        response = await sse(request, event(ask))
        reply = await _posted_reply(fake, "srv-1")
        await response.write(event(result_for(body, {"client_said": reply["result"]})))
        return response

    fake.answer = answer
    upstream = await make_http(fake.url)
    handler = Handler({"model": "m"})
    reply = await upstream.request("tools/call", {"name": "t"}, timeout=10, session_key="acme",
                                   capabilities=frozenset({"sampling"}), on_request=handler)
    assert reply["result"] == {"client_said": {"model": "m"}}
    assert handler.requests == [{"jsonrpc": "2.0", "id": "srv-1", "method": SAMPLING, "params": {"maxTokens": 5}}]
    assert (await _posted_reply(fake, "srv-1"))["session"] == "session-1"


async def test_sessions_are_keyed_by_capabilities_which_each_initialize_declares(
        fake: FakeBackend, make_http: MakeHttp) -> None:  # noqa: F811
    upstream = await make_http(fake.url)
    await upstream.request("tools/list", None, timeout=5)  # the catalogue's own session
    for flags in ({"sampling"}, {"roots", "elicitation.form"}, {"sampling"}, set()):
        await upstream.request("tools/list", None, timeout=5, session_key="acme", capabilities=frozenset(flags))
    declared = [s.body["params"]["capabilities"] for s in fake.posted("initialize")]
    assert declared == [{}, {"sampling": {}}, {"elicitation": {"form": {}}, "roots": {}}, {}]
    sessions = [s.headers["Mcp-Session-Id"] for s in fake.posted("tools/list")]
    assert sessions == ["session-1", "session-2", "session-3", "session-2", "session-4"]


async def test_a_request_on_a_sessions_own_stream_is_refused_not_guessed(
        fake: FakeBackend, make_http: MakeHttp) -> None:  # noqa: F811
    async def stream(request: web.Request) -> web.StreamResponse:
        ask = {"jsonrpc": "2.0", "id": "srv-9", "method": "roots/list"}
        return await sse(request, event(ask), hold=True)

    fake.get_answer = stream
    upstream = await make_http(fake.url)
    handler = Handler({"roots": []})
    await upstream.request("tools/call", {"name": "t"}, timeout=5, session_key="acme",
                           capabilities=frozenset({"roots"}), on_request=handler)
    refusal = await _posted_reply(fake, "srv-9")
    assert refusal["error"]["code"] == -32600
    assert "outside any call" in refusal["error"]["message"]
    assert handler.requests == []


async def test_a_stdio_request_goes_to_the_one_call_that_relays(make_stdio: MakeStdio) -> None:
    upstream = await make_stdio(SCRIPTED)
    handler = Handler({"model": "m"})
    reply = await upstream.request("tools/call", {"name": "ask", "arguments": {}}, timeout=10, on_request=handler)
    assert reply["result"]["reply"] == {"jsonrpc": "2.0", "id": "srv-1", "result": {"model": "m"}}
    assert [r["method"] for r in handler.requests] == [SAMPLING]


async def test_a_stdio_request_with_several_calls_in_flight_is_refused(make_stdio: MakeStdio) -> None:
    upstream = await make_stdio(SCRIPTED)
    other, mine = Handler({"model": "other"}), Handler({"model": "mine"})
    hanging = asyncio.create_task(upstream.request("tools/call", {"name": "hang"}, timeout=10, on_request=other))
    await asyncio.sleep(0.2)
    reply = await upstream.request("tools/call", {"name": "ask", "arguments": {}}, timeout=10, on_request=mine)
    hanging.cancel()
    refusal = reply["result"]["reply"]
    assert refusal["error"]["code"] == -32600
    assert "several calls" in refusal["error"]["message"]
    assert other.requests == mine.requests == []


async def test_a_stdio_request_soon_after_a_relaying_call_ended_unanswered_is_refused(
        make_stdio: MakeStdio) -> None:
    upstream = await make_stdio(SCRIPTED)
    gone, mine = Handler({"model": "gone"}), Handler({"model": "mine"})
    with pytest.raises(UpstreamError):  # timed out: its question could still be on its way
        await upstream.request("tools/call", {"name": "hang"}, timeout=0.2, on_request=gone)
    await asyncio.sleep(0.1)  # the child gets the cancel first (the scripted `ask` reads the next line as its answer)
    reply = await upstream.request("tools/call", {"name": "ask", "arguments": {}}, timeout=10, on_request=mine)
    assert "ended unanswered" in reply["result"]["reply"]["error"]["message"], reply
    assert gone.requests == mine.requests == []


async def test_each_sessions_get_stream_has_a_connection_of_its_own(fake: FakeBackend) -> None:  # noqa: F811
    async def stream(request: web.Request) -> web.StreamResponse:
        return await sse(request, hold=True)  # open until the upstream goes

    fake.get_answer = stream
    upstream = HttpUpstream("one", url=fake.url, headers={}, max_connections=1, client_info={"name": "t"})
    await upstream.start()
    try:
        for flags in ({"sampling"}, {"roots"}, {"sampling"}):  # two streams held open, one call connection
            reply = await upstream.request("tools/call", {"name": "t"}, timeout=5, session_key="acme",
                                           capabilities=frozenset(flags))
            assert reply["result"]["params"]["name"] == "t"
        await asyncio.sleep(0.2)
        assert [s.method for s in fake.seen].count("GET") == 2
    finally:
        await upstream.close()
