"""A 2026 backend's resource subscriptions through the HTTP upstream: one listen stream naming the held URIs.

Against a scripted backend: a (un)subscribe at 2026 re-opens the stream with the new set (the old one
closed only once the new is acknowledged), under the configured identity; a subscribe returns once
a stream naming its URI is acknowledged; an update tagged with that stream's id reaches
`on_resource_updated` once per tenant holding its URI, untagged; a refused listen fails the
subscribe; a backend that offers no subscribe gets the request as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web

from gateway.upstream import HttpUpstream
from gateway.upstream.base import JsonObject, UpstreamError
from upstream.test_http_listen import MODERN, eventually, note

WAIT = 5.0
UPDATED = "notifications/resources/updated"


class WatchFake:
    """A 2026 backend with resources; its listen streams name URIs, and `touch(uri)` tells those that do."""

    def __init__(self, subscribe: bool = True, refuse: bool = False) -> None:
        self.subscribe, self.refuse = subscribe, refuse
        self.listens: list[tuple[dict[str, str], JsonObject]] = []
        self.open: dict[Any, tuple[list[str], asyncio.Queue[bytes]]] = {}
        self.calls: list[str] = []
        self.acking = asyncio.Event()  # cleared: new listen streams wait before their acknowledgement
        self.acking.set()
        self.app = web.Application()
        self.app.router.add_post("/mcp", self.handle)

    def touch(self, uri: str) -> None:
        for request_id, (uris, queue) in self.open.items():
            if uri in uris:
                queue.put_nowait(note(UPDATED, f"{request_id}-other", uri=uri))  # another subscription's
                queue.put_nowait(note(UPDATED, None, uri=uri))  # untagged
                queue.put_nowait(note(UPDATED, request_id, uri=uri))  # the one that counts

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        self.calls.append(body["method"])
        if body["method"] == "server/discover":
            resources = {"subscribe": True} if self.subscribe else {}
            result = {"resultType": "complete", "supportedVersions": [MODERN], "ttlMs": 0, "cacheScope": "public",
                      "capabilities": {"resources": resources}}
            return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": result})
        if body["method"] != "subscriptions/listen" or self.refuse:
            error = {"code": -32601, "message": f"Method not found: {body['method']}"}
            return web.json_response({"jsonrpc": "2.0", "id": body["id"], "error": error})
        self.listens.append((dict(request.headers), body["params"]))
        uris = list(body["params"]["notifications"].get("resourceSubscriptions", []))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        await response.write(note(UPDATED, body["id"], uri=uris[0]))  # before the acknowledgement
        await self.acking.wait()
        await response.write(note("notifications/subscriptions/acknowledged", body["id"],
                                  notifications={"resourceSubscriptions": uris}))
        self.open[body["id"]] = (uris, queue)
        try:
            while True:
                await response.write(await queue.get())
        finally:
            del self.open[body["id"]]


@pytest.fixture
async def started(aiohttp_server: Any) -> AsyncIterator[Any]:
    made: list[HttpUpstream] = []

    async def start(backend: WatchFake) -> tuple[HttpUpstream, list[tuple[str | None, JsonObject | None]]]:
        url = str((await aiohttp_server(backend.app)).make_url("/mcp"))
        upstream = HttpUpstream("t", url=url, headers={"X-Key": "configured"}, max_connections=4,
                                client_info={"name": "tests", "version": "0"}, protocol="2026")
        heard: list[tuple[str | None, JsonObject | None]] = []
        upstream.on_resource_updated(lambda key, params: heard.append((key, params)))
        made.append(upstream)
        await upstream.start()
        return upstream, heard

    yield start
    for upstream in made:
        await upstream.close()


async def _send(upstream: HttpUpstream, method: str, uri: str, tenant: str) -> JsonObject:
    return await upstream.request(method, {"uri": uri}, timeout=WAIT, session_key=tenant,
                                  headers={"X-Key": f"{tenant}-token"})


async def test_a_subscribe_is_a_listen_naming_the_uri_and_its_updates_reach_each_holder(started: Any) -> None:
    backend = WatchFake()
    upstream, heard = await started(backend)
    assert (await _send(upstream, "resources/subscribe", "memo://a", "acme"))["result"] == {}
    assert [uris for uris, _ in backend.open.values()] == [["memo://a"]]  # acknowledged before it returned
    headers, params = backend.listens[0]
    assert params["notifications"] == {"resourceSubscriptions": ["memo://a"]}  # no list kinds on this one
    assert headers["X-Key"] == "configured"  # the catalogue's identity, never a tenant's token
    await _send(upstream, "resources/subscribe", "memo://a", "other")  # held already: no new stream
    assert len(backend.listens) == 1
    backend.touch("memo://a")
    await eventually(lambda: len(heard) == 2)
    await asyncio.sleep(0.1)
    assert sorted(heard) == [("acme", {"uri": "memo://a"}), ("other", {"uri": "memo://a"})]  # tag removed
    assert "resources/subscribe" not in backend.calls  # the method is gone at 2026


async def test_a_new_set_is_a_new_stream_and_the_old_closes_after_its_acknowledgement(started: Any) -> None:
    backend = WatchFake()
    upstream, heard = await started(backend)
    await _send(upstream, "resources/subscribe", "memo://a", "acme")
    await _send(upstream, "resources/subscribe", "memo://b", "acme")
    assert backend.listens[-1][1]["notifications"] == {"resourceSubscriptions": ["memo://a", "memo://b"]}
    await eventually(lambda: [uris for uris, _ in backend.open.values()] == [["memo://a", "memo://b"]])
    await _send(upstream, "resources/unsubscribe", "memo://a", "acme")
    await eventually(lambda: [uris for uris, _ in backend.open.values()] == [["memo://b"]])
    backend.touch("memo://b")
    await eventually(lambda: heard == [("acme", {"uri": "memo://b"})])
    await _send(upstream, "resources/unsubscribe", "memo://b", "acme")  # the last URI: no stream at all
    await eventually(lambda: not backend.open)
    assert len(backend.listens) == 3


async def test_the_old_stream_serves_until_the_new_one_is_acknowledged(started: Any) -> None:
    backend = WatchFake()
    upstream, heard = await started(backend)
    await _send(upstream, "resources/subscribe", "memo://a", "acme")
    backend.acking.clear()
    adding = asyncio.create_task(_send(upstream, "resources/subscribe", "memo://b", "acme"))
    await eventually(lambda: len(backend.listens) == 2)
    backend.touch("memo://a")  # told on the old stream, still open
    await eventually(lambda: heard == [("acme", {"uri": "memo://a"})])
    assert not adding.done()  # the subscribe waits for the stream that names its URI
    backend.acking.set()
    assert (await adding)["result"] == {}
    await eventually(lambda: [uris for uris, _ in backend.open.values()] == [["memo://a", "memo://b"]])


async def test_a_refused_listen_fails_the_subscribe_and_holds_nothing(started: Any) -> None:
    backend = WatchFake(refuse=True)
    upstream, _ = await started(backend)
    with pytest.raises(UpstreamError, match="refused to listen"):
        await _send(upstream, "resources/subscribe", "memo://a", "acme")
    backend.refuse = False
    await _send(upstream, "resources/subscribe", "memo://b", "acme")
    assert backend.listens[-1][1]["notifications"] == {"resourceSubscriptions": ["memo://b"]}


async def test_a_backend_that_offers_no_subscribe_gets_the_request_as_before(started: Any) -> None:
    backend = WatchFake(subscribe=False)
    upstream, _ = await started(backend)
    reply = await _send(upstream, "resources/subscribe", "memo://a", "acme")
    assert reply["error"]["code"] == -32601 and backend.calls[-1] == "resources/subscribe"
    assert backend.listens == []
