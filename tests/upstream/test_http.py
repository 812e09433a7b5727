"""The Streamable HTTP upstream, against real SDK backends and a scriptable aiohttp backend."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from aiohttp import web
from backend_fixtures import RunningBackend, StartBackend, free_port
from multidict import CIMultiDictProxy

from gateway.protocol.sse import encode_event, encode_retry
from gateway.upstream import HttpUpstream, UpstreamError
from gateway.upstream.base import JsonObject

SESSION = "Mcp-Session-Id"
VERSION = "MCP-Protocol-Version"
SECRET = "Bearer backend-secret"
CLIENT_INFO = {"name": "gateway-tests", "version": "0"}


def leftover_tasks() -> list[asyncio.Task[Any]]:
    """Tasks an upstream started that are still alive (named upstream:* or stdio:*)."""
    prefixes = ("upstream:", "stdio:")
    return [t for t in asyncio.all_tasks() if not t.done() and t.get_name().startswith(prefixes)]


MakeHttp = Callable[..., Awaitable[HttpUpstream]]
Answer = Callable[[web.Request, JsonObject], Awaitable[web.StreamResponse]]


@dataclass
class Seen:
    """One HTTP request the fake backend received."""

    method: str
    headers: CIMultiDictProxy[str]
    body: Any


class FakeBackend:
    """A scriptable Streamable HTTP backend: records every request; `answer` shapes replies."""

    def __init__(self) -> None:
        self.url = ""
        self.seen: list[Seen] = []
        self.initializes = 0
        self.expired: set[str] = set()
        self.answer: Answer = echo
        self.get_answer: Callable[[web.Request], Awaitable[web.StreamResponse]] = no_stream
        self.app = web.Application()
        self.app.router.add_route("*", "/mcp", self.handle)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read()) if request.method == "POST" else None
        self.seen.append(Seen(request.method, request.headers, body))
        if request.headers.get(SESSION) in self.expired:
            return web.Response(status=404)
        if request.method == "GET":
            return await self.get_answer(request)
        if request.method == "DELETE":
            return web.Response()
        if body.get("method") == "initialize":
            return await self.initialize(body)
        if body.get("method") == "server/discover":  # a handshake-era backend, as the SDK's refuses it
            error = {"code": -32600, "message": "Bad Request: Missing session ID"}
            return web.json_response({"jsonrpc": "2.0", "id": body.get("id"), "error": error}, status=400)
        if "id" not in body or "method" not in body:
            return web.Response(status=202)
        return await self.answer(request, body)

    async def initialize(self, body: JsonObject) -> web.Response:
        self.initializes += 1
        await asyncio.sleep(0.05)  # wide enough for concurrent first calls to overlap
        result = {
            "protocolVersion": body["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "fake", "version": "1"},
        }
        headers = {SESSION: f"session-{self.initializes}"}
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": result}, headers=headers)

    def posted(self, method: str) -> list[Seen]:
        return [s for s in self.seen if s.method == "POST" and s.body.get("method") == method]


async def echo(request: web.Request, body: JsonObject) -> web.StreamResponse:
    result = {"method": body["method"], "params": body.get("params")}
    return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": result})


async def no_stream(request: web.Request) -> web.StreamResponse:
    return web.Response(status=405)


async def sse(request: web.Request, *blocks: bytes, hold: bool = False) -> web.StreamResponse:
    """Stream `blocks`; with `hold`, keep the stream open (until the client goes away)."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for block in blocks:
        await response.write(block)
    for _ in range(200 if hold else 0):  # a write to a closed connection ends the loop
        await asyncio.sleep(0.05)
        await response.write(b": keep-alive\n\n")
    return response


def event(message: JsonObject) -> bytes:
    return encode_event(orjson.dumps(message))


def result_for(body: JsonObject, result: Any) -> JsonObject:
    return {"jsonrpc": "2.0", "id": body["id"], "result": result}


@pytest.fixture
async def fake(aiohttp_server: Any) -> FakeBackend:
    backend = FakeBackend()
    server = await aiohttp_server(backend.app)
    backend.url = str(server.make_url("/mcp"))
    return backend


@pytest.fixture
async def make_http() -> AsyncIterator[MakeHttp]:
    made: list[HttpUpstream] = []

    async def make(url: str, headers: dict[str, str] | None = None) -> HttpUpstream:
        upstream = HttpUpstream("test", url=url, headers=headers or {}, max_connections=50, client_info=CLIENT_INFO)
        made.append(upstream)
        await upstream.start()
        return upstream

    yield make
    for upstream in made:
        await upstream.close()


async def call(upstream: HttpUpstream, tool: str, budget: float = 10, **arguments: Any) -> JsonObject:
    params = {"name": tool, "arguments": arguments}
    return await upstream.request("tools/call", params, timeout=budget)


async def failure(upstream: HttpUpstream, budget: float = 5) -> UpstreamError:
    with pytest.raises(UpstreamError) as failed:
        await call(upstream, "anything", budget=budget)
    return failed.value


# --- against real SDK backends ----------------------------------------------------------


@pytest.fixture
async def calc(http_backend: StartBackend) -> RunningBackend:
    return await http_backend("calc")


async def test_it_lists_and_calls_the_tools_of_a_real_sdk_backend(calc: RunningBackend, make_http: MakeHttp) -> None:
    upstream = await make_http(calc.url)
    listing = await upstream.request("tools/list", None, timeout=10)
    assert {"add", "slow"} <= {tool["name"] for tool in listing["result"]["tools"]}
    reply = await call(upstream, "add", a=2, b=3)
    assert reply["result"]["structuredContent"] == {"result": 5}


async def test_pages_of_a_real_paginated_backend_are_reachable_by_cursor(
    http_backend: StartBackend, make_http: MakeHttp
) -> None:
    catalog = await http_backend("catalog", "--tools", "5", "--page-size", "2")
    upstream = await make_http(catalog.url)
    names: list[str] = []
    cursor: str | None = None
    for _ in range(5):
        params = {"cursor": cursor} if cursor else None
        page = (await upstream.request("tools/list", params, timeout=10))["result"]
        names += [tool["name"] for tool in page["tools"]]
        if not (cursor := page.get("nextCursor")):
            break
    assert len(names) == 5 and len(set(names)) == 5


async def test_progress_is_relayed_with_the_callers_own_token(calc: RunningBackend, make_http: MakeHttp) -> None:
    upstream = await make_http(calc.url)
    progress: list[JsonObject] = []

    async def collect(notification: JsonObject) -> None:
        progress.append(notification["params"])

    params = {
        "name": "slow",
        "arguments": {"seconds": 0.3, "steps": 3},
        "_meta": {"progressToken": "client-token"},
    }
    await upstream.request("tools/call", params, timeout=10, on_notification=collect)
    assert [p["progressToken"] for p in progress] == ["client-token"] * 3
    assert [p["progress"] for p in progress] == [1, 2, 3]
    assert params["_meta"] == {"progressToken": "client-token"}  # the caller's copy untouched


async def test_a_restarted_backend_is_reinitialized_transparently(calc: RunningBackend, make_http: MakeHttp) -> None:
    upstream = await make_http(calc.url)
    assert (await call(upstream, "add", a=1, b=1))["result"]["structuredContent"] == {"result": 2}
    await calc.restart()  # the new process has never heard of our session: 404
    assert (await call(upstream, "add", a=2, b=2))["result"]["structuredContent"] == {"result": 4}


async def test_a_slow_real_backend_times_out(calc: RunningBackend, make_http: MakeHttp) -> None:
    upstream = await make_http(calc.url)
    with pytest.raises(UpstreamError) as failed:
        await call(upstream, "slow", budget=0.5, seconds=5, steps=1)
    assert failed.value.reason == "timeout"
    assert (await call(upstream, "multiply", a=6, b=7))["result"]["structuredContent"] == {"result": 42}


async def test_a_dead_port_is_unavailable(make_http: MakeHttp) -> None:
    upstream = await make_http(f"http://127.0.0.1:{free_port()}/mcp")
    assert (await failure(upstream)).reason == "unavailable"


async def test_close_leaves_no_task_behind(
    calc: RunningBackend,
) -> None:
    upstream = HttpUpstream("test", url=calc.url, headers={}, max_connections=5, client_info=CLIENT_INFO)
    await upstream.start()
    await call(upstream, "add", a=1, b=1)
    await asyncio.sleep(0.2)  # let the GET listener connect
    await asyncio.wait_for(upstream.close(), 5)
    assert leftover_tasks() == []
    assert (await failure(upstream)).reason == "unavailable"


# --- sessions and headers (scripted backend) ----------------------------------------------


async def test_twenty_concurrent_first_calls_share_one_handshake(fake: FakeBackend, make_http: MakeHttp) -> None:
    upstream = await make_http(fake.url)
    replies = await asyncio.gather(*(call(upstream, "t", n=n) for n in range(20)))
    assert [r["result"]["params"]["arguments"]["n"] for r in replies] == list(range(20))
    assert fake.initializes == 1
    assert len(fake.posted("notifications/initialized")) == 1


async def test_each_session_key_gets_its_own_backend_session(fake: FakeBackend, make_http: MakeHttp) -> None:
    upstream = await make_http(fake.url)
    for key in ("acme", "globex", "acme"):
        await upstream.request("tools/list", None, timeout=5, session_key=key)
    sessions = [s.headers[SESSION] for s in fake.posted("tools/list")]
    assert sessions == ["session-1", "session-2", "session-1"]


async def test_headers_are_the_configured_ones_overridden_by_the_calls(fake: FakeBackend, make_http: MakeHttp) -> None:
    upstream = await make_http(fake.url, {"Authorization": SECRET, "X-Team": "base"})
    await upstream.request("tools/list", None, timeout=5, headers={"x-team": "acme"})
    initialize, listing = fake.posted("initialize")[0].headers, fake.posted("tools/list")[0].headers
    for headers in (initialize, listing):
        assert headers["Authorization"] == SECRET
        assert headers.getall("X-Team") == ["acme"]
        assert headers["Content-Type"] == "application/json"
        assert {"application/json", "text/event-stream"} <= {part.strip() for part in headers["Accept"].split(",")}
    assert SESSION not in initialize and VERSION not in initialize
    assert listing[SESSION] == "session-1"
    assert listing[VERSION] == "2025-11-25"


async def test_an_expired_session_is_renewed_once_and_the_call_retried(fake: FakeBackend, make_http: MakeHttp) -> None:
    upstream = await make_http(fake.url)
    await call(upstream, "first")
    fake.expired.add("session-1")
    assert (await call(upstream, "second"))["result"]["params"]["name"] == "second"
    assert fake.initializes == 2


async def test_a_session_that_expires_again_right_away_is_unavailable(fake: FakeBackend, make_http: MakeHttp) -> None:
    upstream = await make_http(fake.url)
    await call(upstream, "first")
    fake.expired.update({"session-1", "session-2", "session-3"})
    assert (await failure(upstream)).reason == "unavailable"
    assert fake.initializes == 2  # one renewal, not a loop


async def test_close_ends_the_backend_sessions(fake: FakeBackend, make_http: MakeHttp) -> None:
    upstream = await make_http(fake.url)
    await upstream.request("tools/list", None, timeout=5, session_key="acme")
    await upstream.close()
    deletes = [s for s in fake.seen if s.method == "DELETE"]
    assert [d.headers[SESSION] for d in deletes] == ["session-1"]


# --- replies that go wrong ----------------------------------------------------------------


async def test_an_html_502_page_is_unavailable_and_no_secret_leaks(fake: FakeBackend, make_http: MakeHttp) -> None:
    async def bad_gateway(request: web.Request, body: JsonObject) -> web.StreamResponse:
        return web.Response(status=502, text="<html>Bad Gateway</html>", content_type="text/html")

    fake.answer = bad_gateway
    error = await failure(await make_http(fake.url, {"Authorization": SECRET}))
    assert error.reason == "unavailable"
    assert "backend-secret" not in str(error)


async def test_a_backend_json_rpc_error_on_an_http_error_is_passed_through(
    fake: FakeBackend, make_http: MakeHttp
) -> None:
    async def refuse(request: web.Request, body: JsonObject) -> web.StreamResponse:
        error = {"code": -32602, "message": "Unknown tool: x"}
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "error": error}, status=400)

    fake.answer = refuse
    reply = await call(await make_http(fake.url), "x")
    assert reply["error"] == {"code": -32602, "message": "Unknown tool: x"}


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(web.Response(body=b"{not json", content_type="application/json"), id="not-json"),
        pytest.param(web.Response(text="<html>hello</html>", content_type="text/html"), id="html-200"),
        pytest.param(web.json_response({"jsonrpc": "2.0", "id": 999, "result": {}}), id="wrong-id"),
        pytest.param(web.json_response({"jsonrpc": "2.0", "id": 2}), id="no-result"),
        pytest.param(web.Response(status=202), id="202-for-a-request"),
    ],
)
async def test_a_malformed_reply_is_a_bad_response(fake: FakeBackend, make_http: MakeHttp, reply: web.Response) -> None:
    async def answer(request: web.Request, body: JsonObject) -> web.StreamResponse:
        return reply

    fake.answer = answer
    assert (await failure(await make_http(fake.url))).reason == "bad_response"


async def test_a_wrong_id_on_an_sse_stream_is_a_bad_response(fake: FakeBackend, make_http: MakeHttp) -> None:
    async def answer(request: web.Request, body: JsonObject) -> web.StreamResponse:
        return await sse(request, event({"jsonrpc": "2.0", "id": "other", "result": {}}))

    fake.answer = answer
    assert (await failure(await make_http(fake.url))).reason == "bad_response"


async def test_a_stream_that_never_answers_times_out_and_the_backend_is_told(
    fake: FakeBackend, make_http: MakeHttp
) -> None:
    async def answer(request: web.Request, body: JsonObject) -> web.StreamResponse:
        return await sse(request, hold=True)

    fake.answer = answer
    upstream = await make_http(fake.url)
    assert (await failure(upstream, budget=0.3)).reason == "timeout"
    request_id = fake.posted("tools/call")[0].body["id"]
    for _ in range(50):
        if cancels := fake.posted("notifications/cancelled"):
            break
        await asyncio.sleep(0.02)
    assert [c.body["params"]["requestId"] for c in cancels] == [request_id]


# --- SSE replies ----------------------------------------------------------------------------


async def test_sse_notifications_before_the_response_reach_the_caller(fake: FakeBackend, make_http: MakeHttp) -> None:
    async def answer(request: web.Request, body: JsonObject) -> web.StreamResponse:
        token = body["params"]["_meta"]["progressToken"]
        progress = {"progressToken": token, "progress": 1, "total": 2}
        log = {"level": "info", "data": "working"}
        return await sse(
            request,
            encode_retry(100, event_id="prime"),
            event({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress}),
            event({"jsonrpc": "2.0", "method": "notifications/message", "params": log}),
            event(result_for(body, {"done": True})),
        )

    fake.answer = answer
    upstream = await make_http(fake.url)
    seen: list[JsonObject] = []

    async def collect(notification: JsonObject) -> None:
        seen.append(notification)

    params = {"name": "t", "_meta": {"progressToken": 7}}
    reply = await upstream.request("tools/call", params, timeout=5, on_notification=collect)
    assert reply["result"] == {"done": True}
    assert [n["method"] for n in seen] == ["notifications/progress", "notifications/message"]
    assert seen[0]["params"]["progressToken"] == 7
    assert fake.posted("tools/call")[0].body["params"]["_meta"]["progressToken"] != 7


async def test_a_large_sse_event_is_read_whole(fake: FakeBackend, make_http: MakeHttp) -> None:
    blob = "y" * 1_000_000

    async def answer(request: web.Request, body: JsonObject) -> web.StreamResponse:
        return await sse(request, event(result_for(body, {"blob": blob})))

    fake.answer = answer
    assert (await call(await make_http(fake.url), "t"))["result"]["blob"] == blob


async def test_a_backend_request_on_the_stream_gets_method_not_found(fake: FakeBackend, make_http: MakeHttp) -> None:
    async def answer(request: web.Request, body: JsonObject) -> web.StreamResponse:
        ask = {"jsonrpc": "2.0", "id": "srv-1", "method": "experimental/whatever", "params": {}}
        return await sse(request, event(ask), event(result_for(body, {})))

    fake.answer = answer
    await call(await make_http(fake.url), "t")
    for _ in range(50):
        replies = [s.body for s in fake.seen if s.body and s.body.get("id") == "srv-1"]
        if replies:
            break
        await asyncio.sleep(0.02)
    assert replies[0]["error"]["code"] == -32601


async def test_a_stream_closed_early_is_resumed_with_last_event_id(fake: FakeBackend, make_http: MakeHttp) -> None:
    answers: dict[str, JsonObject] = {}

    async def answer(request: web.Request, body: JsonObject) -> web.StreamResponse:
        answers["e1"] = result_for(body, {"resumed": True})
        return await sse(request, encode_retry(10, event_id="e1"))  # then the connection closes

    async def resume(request: web.Request) -> web.StreamResponse:
        last = request.headers.get("Last-Event-ID", "")
        if last not in answers:
            return web.Response(status=405)
        return await sse(request, encode_event(orjson.dumps(answers[last]), event_id="e2"))

    fake.answer, fake.get_answer = answer, resume
    reply = await call(await make_http(fake.url), "t")
    assert reply["result"] == {"resumed": True}


# --- the GET stream ---------------------------------------------------------------------------


async def test_list_changed_on_the_get_stream_runs_the_callbacks(fake: FakeBackend, make_http: MakeHttp) -> None:
    async def stream(request: web.Request) -> web.StreamResponse:
        changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        return await sse(request, event(changed), hold=True)

    fake.get_answer = stream
    upstream = await make_http(fake.url)
    fired: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def on_change(method: str) -> None:
        fired.set_result(method)

    upstream.on_list_changed(on_change)
    await call(upstream, "t")
    assert await asyncio.wait_for(fired, 5) == "notifications/tools/list_changed"
    get = next(s for s in fake.seen if s.method == "GET")
    assert get.headers[SESSION] == "session-1"
    assert get.headers["Accept"] == "text/event-stream"


async def test_a_backend_without_a_get_stream_is_asked_once(fake: FakeBackend, make_http: MakeHttp) -> None:
    upstream = await make_http(fake.url)
    await call(upstream, "t")
    await asyncio.sleep(0.3)
    assert [s.method for s in fake.seen].count("GET") == 1


async def test_tenant_sessions_open_no_get_stream(fake: FakeBackend, make_http: MakeHttp) -> None:
    upstream = await make_http(fake.url)
    await upstream.request("tools/list", None, timeout=5, session_key="acme")
    await asyncio.sleep(0.1)
    assert "GET" not in [s.method for s in fake.seen]
