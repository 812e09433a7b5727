"""The HTTP upstream's `subscriptions/listen` stream to a 2026 backend, against a scripted backend.

Only what the backend's discover promises is asked for; only notifications tagged with the listen's
id, after its acknowledgement, count; a stream that ends is opened again (and its kinds re-listed);
a refused listen is not asked again, and the backend then counts as one that cannot announce.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web

from gateway.upstream import HttpUpstream
from gateway.upstream.base import JsonObject

MODERN = "2026-07-28"
TAG = "io.modelcontextprotocol/subscriptionId"
TOOLS_CHANGED = "notifications/tools/list_changed"
WAIT = 5.0


def frame(message: JsonObject) -> bytes:
    return b"event: message\ndata: " + orjson.dumps(message) + b"\n\n"


def note(method: str, tag: Any, **params: Any) -> bytes:
    meta = {} if tag is None else {"_meta": {TAG: tag}}
    return frame({"jsonrpc": "2.0", "method": method, "params": {**params, **meta}})


class ListenFake:
    """A 2026 backend: discover promises `promised`; a listen gets `refuse` as its HTTP status, or
    the frames `script(id)` gives and, unless `hold`, its end."""

    def __init__(self, promised: JsonObject, refuse: int | None = None) -> None:
        self.promised, self.refuse = promised, refuse
        self.listens: list[tuple[dict[str, str], JsonObject]] = []
        self.hold = asyncio.Event()
        self.cut = False  # the connection is cut mid-stream (no end): the client's read fails
        self.app = web.Application()
        self.app.router.add_post("/mcp", self.handle)

    def script(self, request_id: Any) -> list[bytes]:
        ack = note("notifications/subscriptions/acknowledged", request_id, notifications={"toolsListChanged": True})
        return [note(TOOLS_CHANGED, request_id),  # before the acknowledgement: not yet a stream
                ack,
                note(TOOLS_CHANGED, f"{request_id}-other"),  # another subscription's
                note(TOOLS_CHANGED, None),  # untagged
                note(TOOLS_CHANGED, request_id)]  # the one that counts

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        if body["method"] == "server/discover":
            result = {"resultType": "complete", "supportedVersions": [MODERN], "capabilities": self.promised,
                      "ttlMs": 0, "cacheScope": "public"}
            return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": result})
        assert body["method"] == "subscriptions/listen", body
        self.listens.append((dict(request.headers), body["params"]))
        if self.refuse is not None:
            return web.Response(status=self.refuse)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for data in self.script(body["id"]):
            await response.write(data)
        await self.hold.wait()
        if self.cut:
            assert request.transport is not None
            request.transport.abort()
            return response
        await response.write(frame({"jsonrpc": "2.0", "id": body["id"],
                                    "result": {"resultType": "complete", "_meta": {TAG: body["id"]}}}))
        return response


@pytest.fixture
async def started(aiohttp_server: Any) -> AsyncIterator[Any]:
    made: list[HttpUpstream] = []

    async def start(backend: ListenFake) -> tuple[HttpUpstream, list[str]]:
        url = str((await aiohttp_server(backend.app)).make_url("/mcp"))
        upstream = HttpUpstream("t", url=url, headers={"X-Key": "configured"}, max_connections=4,
                                client_info={"name": "tests", "version": "0"}, protocol="2026")
        heard: list[str] = []

        async def changed(method: str) -> None:
            heard.append(method)

        upstream.on_list_changed(changed)
        made.append(upstream)
        await upstream.start()
        await upstream.request("server/discover", None, timeout=WAIT, headers={"X-Key": "a-tenants"})
        return upstream, heard

    yield start
    for upstream in made:
        await upstream.close()


async def eventually(check: Any) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)


async def test_only_the_acknowledged_streams_own_notifications_count(started: Any) -> None:
    backend = ListenFake({"tools": {"listChanged": True}, "prompts": {}})
    upstream, heard = await started(backend)
    await eventually(lambda: heard)
    await asyncio.sleep(0.1)
    assert heard == [TOOLS_CHANGED] and upstream.announces
    headers, params = backend.listens[0]
    assert params["notifications"] == {"toolsListChanged": True}  # what discover promised, no more
    assert params["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN
    assert (headers["Mcp-Method"], headers["MCP-Protocol-Version"]) == ("subscriptions/listen", MODERN)
    assert headers["X-Key"] == "configured"  # the catalogue's identity, not the tenant whose request found it


async def test_an_ended_stream_is_opened_again_and_its_kinds_listed_again(started: Any) -> None:
    backend = ListenFake({"tools": {"listChanged": True}})
    upstream, heard = await started(backend)
    await eventually(lambda: upstream.announces)
    backend.hold.set()  # the backend ends it gracefully: listen again, and re-list (no replay)
    await eventually(lambda: len(backend.listens) == 2 and len(heard) == 3)
    assert heard == [TOOLS_CHANGED] * 3


async def test_a_cut_stream_is_opened_again_and_its_kinds_listed_again(started: Any) -> None:
    """A break the client reads as an error, not an end: what was said meanwhile is still fetched."""
    backend = ListenFake({"tools": {"listChanged": True}})
    upstream, heard = await started(backend)
    await eventually(lambda: upstream.announces)
    backend.cut = True
    backend.hold.set()
    await eventually(lambda: len(backend.listens) == 2 and len(heard) == 3)
    assert heard == [TOOLS_CHANGED] * 3


@pytest.mark.parametrize("status", [404, 405])
async def test_a_refused_listen_is_not_asked_again(started: Any, status: int) -> None:
    backend = ListenFake({"tools": {"listChanged": True}}, refuse=status)
    upstream, heard = await started(backend)
    await eventually(lambda: backend.listens)
    await asyncio.sleep(1.2)  # past the first backoff
    assert len(backend.listens) == 1 and heard == [] and not upstream.announces


async def test_a_backend_that_promises_no_list_changes_is_not_listened_to(started: Any) -> None:
    backend = ListenFake({"tools": {}, "resources": {"subscribe": True}})
    upstream, _ = await started(backend)
    await asyncio.sleep(0.3)
    assert backend.listens == [] and not upstream.announces
