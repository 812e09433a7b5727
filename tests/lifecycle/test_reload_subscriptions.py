"""Resource subscriptions and 2026 listen streams across a live reload, against the real process.

The backend is tests/e2e/watched_backend.py as a stdio child (official SDK): it tells its subscribed
sessions when a resource changes and keeps a journal of the (un)subscribes it was sent.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from stateless_client import StatelessClient

from gateway.protocol.sse import SseDecoder
from lifecycle.processes import REPO_ROOT
from lifecycle.test_reload import USER_KEY, WAIT, Client, admin_reload, calc, serve, write_config

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")]

WATCHED = [sys.executable, str(REPO_ROOT / "tests" / "e2e" / "watched_backend.py")]
UPDATED = "notifications/resources/updated"
TOOLS_CHANGED = "notifications/tools/list_changed"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
QUIET = 1.0


def watched(name: str, mark: str | None = None) -> dict[str, Any]:
    return {"name": name, "transport": "stdio", "command": WATCHED, "cwd": str(REPO_ROOT),
            "env": {"MARK": mark or name}}


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        yield session


async def updates(client: Client, within: float) -> list[str]:
    """The URIs of the resources/updated the session's GET stream got within `within` seconds."""
    uris: list[str] = []
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        try:
            message = await asyncio.wait_for(client.notifications.get(), left)
        except TimeoutError:
            break
        if message.get("method") == UPDATED:
            uris.append(message["params"]["uri"])
    return uris


async def touched(client: Client, text: str) -> list[str]:
    """Change memo://a on the backend; the updates the session then hears (one expected, waited for)."""
    reply = await client.call("w__touch", uri="memo://a", text=text)
    assert reply["result"]["isError"] is False, reply
    heard = await updates(client, QUIET)
    deadline = time.monotonic() + WAIT
    while not heard and time.monotonic() < deadline:
        heard = await updates(client, QUIET)
    return heard


async def journal_becomes(client: Client, expected: list[list[str]]) -> None:
    deadline = time.monotonic() + WAIT
    while True:
        reply = await client.call("w__journal")
        journal = json.loads(reply["result"]["content"][0]["text"])["journal"]
        if journal == expected:
            return
        assert time.monotonic() < deadline, journal
        await asyncio.sleep(0.2)


async def test_a_subscription_outlives_a_reload_that_adds_a_backend(start_gateway: Any, tmp_path: Path,
                                                                    http: aiohttp.ClientSession) -> None:
    config = write_config(tmp_path / "gateway.yaml", backends=[watched("w")])
    gateway = await serve(start_gateway, config)
    client = await Client(http, gateway.url()).open()
    assert "result" in await client.rpc("resources/subscribe", {"uri": "w+memo://a"})
    assert await touched(client, "1") == ["w+memo://a"]

    write_config(config, backends=[watched("w"), calc("more")])
    status, outcome = await admin_reload(http, gateway)
    assert status == 200 and outcome["backends"]["added"] == ["more"], outcome
    await client.notified(TOOLS_CHANGED)

    assert await touched(client, "2") == ["w+memo://a"], "heard once: no second hook on the kept upstream"
    assert "result" in await client.rpc("resources/unsubscribe", {"uri": "w+memo://a"})
    await journal_becomes(client, [["subscribe", "memo://a"], ["unsubscribe", "memo://a"]])  # the reload's
    await client.call("w__touch", uri="memo://a", text="3")  # dispatcher knew the subscription taken before it
    assert await updates(client, QUIET) == []
    await client.close()


async def test_a_replaced_backend_is_subscribed_again_and_a_removed_one_forgotten(
        start_gateway: Any, tmp_path: Path, http: aiohttp.ClientSession) -> None:
    config = write_config(tmp_path / "gateway.yaml", backends=[watched("w"), calc("calc")])
    gateway = await serve(start_gateway, config)
    client = await Client(http, gateway.url()).open()
    assert "result" in await client.rpc("resources/subscribe", {"uri": "w+memo://a"})

    write_config(config, backends=[watched("w", mark="w-2"), calc("calc")])  # a new child for w
    status, outcome = await admin_reload(http, gateway)
    assert status == 200 and outcome["backends"]["replaced"] == ["w"], outcome
    await journal_becomes(client, [["subscribe", "memo://a"]])  # the new child's journal
    assert await touched(client, "new child") == ["w+memo://a"]

    write_config(config, backends=[calc("calc")])
    status, outcome = await admin_reload(http, gateway)
    assert status == 200 and outcome["backends"]["removed"] == ["w"], outcome
    reply = await client.rpc("resources/unsubscribe", {"uri": "w+memo://a"})
    assert reply["error"]["code"] == -32002  # the resource is gone with its backend
    assert (await client.call("calc__add", a=1, b=2))["result"]["isError"] is False
    assert not [e for e in gateway.events() if e.get("level") == "error"], gateway.output()
    await client.close()


async def test_an_update_a_reload_hides_from_the_tenant_is_withheld(start_gateway: Any, tmp_path: Path,
                                                                   http: aiohttp.ClientSession) -> None:
    config = write_config(tmp_path / "gateway.yaml", backends=[watched("w")])
    gateway = await serve(start_gateway, config)
    client = await Client(http, gateway.url()).open()
    for uri in ("w+memo://a", "w+memo://b"):
        assert "result" in await client.rpc("resources/subscribe", {"uri": uri})

    hidden = {"acme": {"backends": ["*"], "resources": {"deny": ["w+memo://a"]}}, "ops": {"backends": []}}
    write_config(config, backends=[watched("w")], tenants=hidden)
    status, outcome = await admin_reload(http, gateway)
    assert status == 200 and outcome["tenants_changed"] == ["acme"], outcome
    await client.call("w__touch", uri="memo://a", text="secret")
    await client.call("w__touch", uri="memo://b", text="fine")  # heard, so memo://a's update had its chance
    heard = await updates(client, QUIET)
    deadline = time.monotonic() + WAIT
    while "w+memo://b" not in heard and time.monotonic() < deadline:
        heard += await updates(client, QUIET)
    assert heard == ["w+memo://b"]
    await client.close()


class ListenStream:
    """A raw 2026 subscriptions/listen stream: its frames read into a queue."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.raw = StatelessClient(http, url, USER_KEY)
        self.frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.message = self.raw.request("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> ListenStream:
        self._task = asyncio.create_task(self._read())
        ack = await self.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged", ack
        return self

    async def next(self) -> dict[str, Any]:
        return await asyncio.wait_for(self.frames.get(), WAIT)

    async def _read(self) -> None:
        raw, message = self.raw, self.message
        async with raw.session.post(raw.url, data=orjson.dumps(message), headers=raw.headers(message)) as response:
            assert response.status == 200 and response.content_type == "text/event-stream"
            decoder = SseDecoder()
            async for chunk in response.content.iter_any():
                for event in decoder.feed(chunk):
                    if event.data:
                        self.frames.put_nowait(orjson.loads(event.data))

    async def close(self) -> None:
        assert self._task is not None and not self._task.done(), "the stream ended"
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def test_listen_streams_stay_open_and_hear_the_reloads_list_changes(start_gateway: Any, tmp_path: Path,
                                                                         http: aiohttp.ClientSession) -> None:
    config = write_config(tmp_path / "gateway.yaml", backends=[calc("calc")])
    gateway = await serve(start_gateway, config)
    before = await ListenStream(http, gateway.url()).open()

    write_config(config, backends=[calc("calc"), calc("more")])  # a new backend: the catalogue announces it
    assert (await admin_reload(http, gateway))[0] == 200
    frame = await before.next()
    assert frame["method"] == TOOLS_CHANGED and frame["params"]["_meta"][SUBSCRIPTION_ID] == before.message["id"]
    after = await ListenStream(http, gateway.url()).open()  # served by the reload's dispatcher

    write_config(config, backends=[calc("calc"), calc("more")], allow=("calc__*",))  # the tenant's policy only
    status, outcome = await admin_reload(http, gateway)
    assert status == 200 and outcome["tenants_changed"] == ["acme"], outcome
    for stream in (before, after):
        assert (await stream.next())["method"] == TOOLS_CHANGED
    await before.close()
    await after.close()
