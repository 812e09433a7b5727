"""GET streams resumed with Last-Event-ID: replayed on the same replica, caught up on another."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from backend_fixtures import StartBackend
from conftest import RawClient, http_backend_config, make_token

from gateway import keys
from gateway.transport.http.streams import REPLAY_EVENTS, StreamHub
from shared_state.conftest import StartReplicas, needs_shared_redis
from shared_state.helpers import GetStream

LIST_CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


# ---------------------------------------------------------------- the hub alone


def test_event_ids_carry_the_hub_epoch_and_resume_after_the_last_one_seen() -> None:
    hub = StreamHub(catch_up=[LIST_CHANGED], epoch="e1")
    hub.open("s", "acme")
    hub.publish({"acme"}, {"n": 1})
    hub.publish({"acme"}, {"n": 2})
    replayed = hub.replay("s", "e1-1")
    assert [(i, orjson.loads(d)) for i, d in replayed] == [("e1-2", {"n": 2})]
    assert hub.replay("s", "e1-2") == []


def test_an_id_from_another_hub_gets_the_catch_up_message() -> None:
    hub = StreamHub(catch_up=[LIST_CHANGED], epoch="e1")
    hub.open("s", "acme")
    for foreign in ("e2-1", "17", "garbage"):
        ((event_id, data),) = hub.replay("s", foreign)
        assert event_id.startswith("e1-") and orjson.loads(data) == LIST_CHANGED


def test_every_catch_up_message_comes_in_order_with_its_own_id() -> None:
    kinds = [{"jsonrpc": "2.0", "method": f"notifications/{k}/list_changed"} for k in ("tools", "prompts", "resources")]
    hub = StreamHub(catch_up=kinds, epoch="e1")
    hub.open("s", "acme")
    replayed = hub.replay("s", "e2-1")
    assert [orjson.loads(d) for _, d in replayed] == kinds
    assert len({event_id for event_id, _ in replayed}) == 3


def test_a_hub_reaches_the_tenants_of_open_and_of_dropped_streams_until_their_session_ends() -> None:
    hub = StreamHub(epoch="e1")
    queue = hub.open("s1", "acme")
    hub.open("s2", "globex")
    hub.detach("s1", queue)  # dropped: its events are kept for a resume
    assert hub.reached() == {"acme", "globex"}
    hub.forget("s1")
    assert hub.reached() == {"globex"}


def test_events_pushed_out_of_the_buffer_get_the_catch_up_and_no_catch_up_means_nothing() -> None:
    hub = StreamHub(catch_up=[LIST_CHANGED], epoch="e1")
    hub.open("s", "acme")
    for n in range(REPLAY_EVENTS + 5):
        hub.publish({"acme"}, {"n": n})
    assert len(hub.replay("s", f"e1-{REPLAY_EVENTS}")) == 5  # still in the buffer: replayed exactly
    assert [orjson.loads(d) for _, d in hub.replay("s", "e1-2")] == [LIST_CHANGED]  # some were lost
    quiet = StreamHub(epoch="e1")
    quiet.open("s", "acme")
    assert quiet.replay("s", "e9-1") == []


# ---------------------------------------------------------------- two replicas


@needs_shared_redis
@pytest.mark.timeout(60)
async def test_a_dropped_stream_resumes_on_its_replica_and_catches_up_on_another(
        replicas: StartReplicas, http_backend: StartBackend, raw_client: Any, tmp_path: Path) -> None:
    count_file = tmp_path / "tools"
    count_file.write_text("1")
    catalog = await http_backend("catalog", env={"CATALOG_TOOLS_FILE": str(count_file)})
    a, b = await replicas(2, [http_backend_config("cat", catalog.url)], catalogue={"refresh_seconds": 60})
    client: RawClient = raw_client(a.url, make_token("acme"))
    await client.initialize()
    token, session_id = client.token or "", client.session_id or ""
    async with aiohttp.ClientSession() as http:
        first = await GetStream(http, a.url, token, session_id).open()
        count_file.write_text("2")
        await a.app[keys.CATALOGUE].refresh_all()
        seen = await first.next(2.0)
        await first.close()  # the connection drops; a change happens meanwhile
        count_file.write_text("3")
        await a.app[keys.CATALOGUE].refresh_all()
        await asyncio.sleep(0.2)

        again = await GetStream(http, a.url, token, session_id, last_event_id=seen.id).open()
        missed = await again.next(2.0)
        assert orjson.loads(missed.data) == LIST_CHANGED and missed.id != seen.id
        await again.close()

        elsewhere = await GetStream(http, b.url, token, session_id, last_event_id=missed.id).open()
        caught_up = await elsewhere.next(2.0)  # B cannot know what A sent: it says "list again"
        assert orjson.loads(caught_up.data) == LIST_CHANGED
        assert caught_up.id.split("-")[0] != missed.id.split("-")[0]
        await elsewhere.close()
