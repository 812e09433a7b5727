"""The HTTP upstream's protocol eras against a scriptable backend that can change its era.

Finding the era (handshake first, then server/discover), keeping it, finding it again when the
backend restarts as the other era; what a 2026 request carries (the gateway's envelope, routing
headers, no session, none of the client's connection keys); what comes back (2026-only fields
gone, cache hints learned, a task only when declared); and InputRequiredResult rounds answered through `on_request`.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp import web

from gateway.protocol.capabilities import WITH_TASKS as TASKS
from gateway.upstream import HttpUpstream, UpstreamError
from gateway.upstream.base import Answer, JsonObject, server_capabilities
from gateway.upstream.input_rounds import MAX_ROUNDS

MODERN = "2026-07-28"
CLIENT_INFO = {"name": "gateway-tests", "version": "0"}
Result = Callable[[JsonObject], JsonObject]


class EraFake:
    """A backend of one era at a time (`era`); `result` makes each 2026 tools/call result."""

    def __init__(self, era: str) -> None:
        self.era = era
        self.url = ""
        self.posts: list[tuple[dict[str, str], JsonObject]] = []
        self.result: Result = lambda body: {"content": [], "resultType": "complete"}
        self.list_ttl = 30_000
        self.app = web.Application()
        self.app.router.add_post("/mcp", self.handle)

    def methods(self) -> list[str]:
        return [body.get("method", "") for _, body in self.posts]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        self.posts.append((dict(request.headers), body))
        modern = request.headers.get("MCP-Protocol-Version") == MODERN
        if "id" not in body:
            return web.Response(status=202)
        if modern != (self.era == "2026"):  # what a single-era server answers the other era
            return web.json_response({"jsonrpc": "2.0", "id": None,
                                      "error": {"code": -32600, "message": "wrong era"}}, status=400)
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": self.answer(body)},
                                 headers={} if modern else {"Mcp-Session-Id": "s1"})

    def answer(self, body: JsonObject) -> JsonObject:
        method = body["method"]
        if method == "initialize":
            return {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "f"}}
        if method == "server/discover":
            return {"supportedVersions": [MODERN], "capabilities": {"tools": {}, "prompts": {}}, "ttlMs": 0,
                    "cacheScope": "private", "resultType": "complete"}
        if method == "tools/list":
            tool = {"name": "locate", "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"}}}}
            return {"tools": [tool], "ttlMs": self.list_ttl, "cacheScope": "public", "resultType": "complete",
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "f", "version": "1"}}}
        if method == "prompts/list":
            return {"prompts": [], "ttlMs": self.list_ttl, "cacheScope": "private", "resultType": "complete"}
        return self.result(body) if self.era == "2026" else {"content": [], "isError": False}


@pytest.fixture
async def fake(aiohttp_server: Any) -> EraFake:
    backend = EraFake("2026")
    backend.url = str((await aiohttp_server(backend.app)).make_url("/mcp"))
    return backend


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., Awaitable[HttpUpstream]]]:
    made: list[HttpUpstream] = []

    async def start(url: str, protocol: str = "auto") -> HttpUpstream:
        upstream = HttpUpstream("t", url=url, headers={}, max_connections=10, client_info=CLIENT_INFO,
                                protocol=protocol)
        made.append(upstream)
        await upstream.start()
        return upstream

    yield start
    for upstream in made:
        await upstream.close()


async def call(upstream: HttpUpstream, **kwargs: Any) -> JsonObject:
    params = {"name": "locate", "arguments": {"region": "zürich"},
              "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "progressToken": "p",
                        "io.modelcontextprotocol/clientInfo": {"name": "the-client"}}}
    return await upstream.request("tools/call", params, timeout=10, **kwargs)


async def test_a_2026_only_backend_is_found_once_and_spoken_to_without_a_session(
        fake: EraFake, make: Callable[..., Awaitable[HttpUpstream]]) -> None:
    upstream = await make(fake.url)
    await upstream.request("tools/list", None, timeout=10)
    for _ in range(3):
        assert "result" in await call(upstream, capabilities=frozenset({"sampling"}))
    assert fake.methods() == ["initialize", "server/discover", "tools/list", "tools/call", "tools/call", "tools/call"]
    assert upstream.server_capabilities == {"tools": {}, "prompts": {}}
    headers, body = fake.posts[-1]
    assert "Mcp-Session-Id" not in headers
    assert headers["MCP-Protocol-Version"] == MODERN and headers["Mcp-Method"] == "tools/call"
    assert headers["Mcp-Name"] == "locate"
    assert headers["Mcp-Param-Region"] == f"=?base64?{base64.b64encode('zürich'.encode()).decode()}?="  # not ASCII
    meta = body["params"]["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == MODERN
    assert meta["io.modelcontextprotocol/clientInfo"] == CLIENT_INFO  # the gateway's, never the client's
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {"sampling": {}}
    assert meta["progressToken"] != "p"  # mapped, as for every backend


async def test_a_2026_reply_loses_its_2026_fields_and_its_cache_hint_is_learned(
        fake: EraFake, make: Callable[..., Awaitable[HttpUpstream]]) -> None:
    upstream = await make(fake.url, "2026")
    listed = (await upstream.request("tools/list", None, timeout=10))["result"]
    assert set(listed) == {"tools"}
    assert upstream._wire.ttl_ms == {"tools/list": 30_000}
    assert fake.methods() == ["server/discover", "tools/list"]  # pinned: no handshake tried


async def test_a_task_the_gateway_did_not_ask_for_is_refused(
        fake: EraFake, make: Callable[..., Awaitable[HttpUpstream]]) -> None:
    fake.result = lambda body: {"resultType": "task", "taskId": "t1", "status": "working"}
    reply = await call(await make(fake.url), capabilities=frozenset({"sampling"}))
    assert reply["error"]["code"] == -32603 and "task" in reply["error"]["message"]
    assert "extensions" not in fake.posts[-1][1]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]


async def test_a_declared_task_comes_back_as_the_backend_made_it_and_tasks_get_names_its_task(
        fake: EraFake, make: Callable[..., Awaitable[HttpUpstream]]) -> None:
    created = {"resultType": "task", "taskId": "b-1", "status": "working", "ttlMs": 60_000,
               "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z"}
    fake.result = lambda body: created if body["method"] == "tools/call" else {
        **created, "resultType": "complete", "status": "completed", "result": {"content": []}}
    upstream = await make(fake.url)
    assert (await call(upstream, capabilities=TASKS))["result"] == created
    declared = fake.posts[-1][1]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert declared == {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    got = await upstream.request("tasks/get", {"taskId": "b-1"}, timeout=10, capabilities=TASKS)
    assert got["result"]["ttlMs"] == 60_000 and got["result"]["status"] == "completed"  # the task's own ttlMs
    headers, body = fake.posts[-1]
    assert headers["Mcp-Method"] == "tasks/get" and headers["Mcp-Name"] == "b-1" and body["params"]["taskId"] == "b-1"


async def test_a_handshake_session_is_never_told_of_the_tasks_extension(
        fake: EraFake, make: Callable[..., Awaitable[HttpUpstream]]) -> None:
    fake.era = "handshake"
    upstream = await make(fake.url, "handshake")
    await call(upstream, capabilities=frozenset({"sampling"}) | TASKS)
    await call(upstream, capabilities=frozenset({"sampling"}))
    initializes = [body for _, body in fake.posts if body.get("method") == "initialize"]
    assert len(initializes) == 1  # one session for both: the extension does not key it
    assert initializes[0]["params"]["capabilities"] == {"sampling": {}}


async def test_a_pinned_handshake_backend_is_never_asked_for_discover(
        fake: EraFake, make: Callable[..., Awaitable[HttpUpstream]]) -> None:
    fake.era = "handshake"
    upstream = await make(fake.url, "handshake")
    await call(upstream)
    fake.era = "2026"
    with pytest.raises(UpstreamError):
        await call(upstream)
    assert "server/discover" not in fake.methods()


async def test_a_backend_that_restarts_as_the_other_era_is_found_again(
        fake: EraFake, make: Callable[..., Awaitable[HttpUpstream]]) -> None:
    fake.era = "handshake"
    upstream = await make(fake.url)
    await call(upstream)
    fake.era, fake.posts = "2026", []
    assert "result" in await call(upstream)  # the session's request is refused: discover, then again at 2026
    assert fake.methods() == ["tools/call", "server/discover", "tools/call"]
    fake.era, fake.posts = "handshake", []
    assert "result" in await call(upstream)
    assert fake.methods() == ["tools/call", "tools/call"]  # the kept session works again
    assert upstream._era == "handshake"


def asker(answers: list[JsonObject]) -> Callable[[JsonObject, Answer], None]:
    """An on_request handler that answers each request with the next of `answers`."""
    asked: list[JsonObject] = []

    def on_request(request: JsonObject, answer: Answer) -> None:
        asked.append(request)
        response = {"jsonrpc": "2.0", "id": request["id"], **answers[len(asked) - 1]}
        asyncio.get_running_loop().create_task(answer(response))

    on_request.asked = asked  # type: ignore[attr-defined]
    return on_request


async def test_input_rounds_are_answered_by_the_client_and_retried(
        fake: EraFake, make: Callable[..., Awaitable[HttpUpstream]]) -> None:
    def result(body: JsonObject) -> JsonObject:
        params = body["params"]
        if "inputResponses" not in params:
            return {"resultType": "input_required", "requestState": "s1", "inputRequests": {
                "who": {"method": "elicitation/create", "params": {"message": "who?", "requestedSchema": {}}}}}
        assert params["requestState"] == "s1"
        who = params["inputResponses"]["who"]["content"]["name"]
        return {"resultType": "complete", "content": [{"type": "text", "text": f"hi {who}"}]}

    fake.result = result
    on_request = asker([{"result": {"action": "accept", "content": {"name": "ada"}}}])
    reply = await call(await make(fake.url), on_request=on_request)
    assert reply["result"] == {"content": [{"type": "text", "text": "hi ada"}]}
    assert on_request.asked[0]["method"] == "elicitation/create"  # type: ignore[attr-defined]
    first, retry = (body for _, body in fake.posts if body.get("method") == "tools/call")
    assert first["id"] != retry["id"]


async def test_input_rounds_are_bounded_and_a_refused_question_ends_the_call(
        fake: EraFake, make: Callable[..., Awaitable[HttpUpstream]]) -> None:
    fake.result = lambda body: {"resultType": "input_required", "requestState": "again"}
    upstream = await make(fake.url)
    reply = await call(upstream)
    assert "rounds" in reply["error"]["message"]
    assert fake.methods().count("tools/call") == MAX_ROUNDS + 1
    fake.result = lambda body: {"resultType": "input_required", "inputRequests": {
        "m": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}}}
    refused = asker([{"error": {"code": -32600, "message": "Sampling not supported"}}])
    reply = await call(upstream, on_request=refused)
    assert reply["error"]["code"] == -32600 and "Sampling not supported" in reply["error"]["message"]
    reply = await call(upstream)  # nobody to ask at all
    assert "cannot reach the client" in reply["error"]["message"]


async def test_a_2026_clients_call_gets_the_input_required_result_as_the_backend_made_it(
        fake: EraFake, make: Callable[..., Awaitable[HttpUpstream]]) -> None:
    """A 2026 client answers and retries by itself: the backend's keys and state reach it untouched."""
    asked = {"user_name": {"method": "elicitation/create", "params": {"message": "name?", "requestedSchema": {}}}}
    fake.result = lambda body: {"resultType": "input_required", "inputRequests": asked, "requestState": "opaque"}

    class ModernClient:
        passes_input_required = True
        declared = frozenset({"elicitation.form"})

        def __call__(self, request: JsonObject, answer: Answer) -> None:
            raise AssertionError("nothing is asked on a 2026 client's behalf")

    reply = await call(await make(fake.url), on_request=ModernClient())
    assert reply["result"] == {"resultType": "input_required", "inputRequests": asked, "requestState": "opaque"}
    meta = fake.posts[-1][1]["params"]["_meta"]
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {"elicitation": {"form": {}}}
    assert fake.methods().count("tools/call") == 1


def test_a_handshake_never_offers_the_tasks_extension() -> None:
    """It applies at 2026-07-28 only: a backend in a session is never relayed tasks, so its offer is dropped."""
    extensions = {"io.modelcontextprotocol/tasks": {}, "x.y/z": {}}
    reply = {"result": {"capabilities": {"tools": {}, "extensions": extensions}}}
    assert server_capabilities(reply) == {"tools": {}, "extensions": {"x.y/z": {}}}
