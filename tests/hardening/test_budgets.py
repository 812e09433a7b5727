"""Issue 17, items 2, 3 and 7: per-tenant budgets one tenant cannot spend for another.

The real app on 127.0.0.1 (aiohttp_server) with the calc backend: tenant acme attacks with
batches, sessions, concurrent calls and GET streams; tenant globex is served all along.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import orjson
import pytest
from conftest import RawClient, StartGateway, make_config, make_token, stdio_backend

from gateway import keys
from gateway.protocol import spec
from gateway.transport.http.streams import REPLAY_EVENTS
from hardening.helpers import until

pytestmark = pytest.mark.timeout(120)

ADD = {"name": "calc__add", "arguments": {"a": 1, "b": 2}}
LEGIT_DEADLINE = 1.0


def _tenants(**acme: Any) -> dict[str, Any]:
    """acme (with `acme`'s settings) and globex, both seeing every backend."""
    return {"acme": {"backends": ["*"], **acme}, "globex": {"backends": ["*"]}}


def _call(client: RawClient, tool: dict[str, Any] = ADD) -> dict[str, Any]:
    return client.request("tools/call", tool)


async def _legit_call(client: RawClient) -> None:
    """globex's call: answered, and within the deadline."""
    started = time.monotonic()
    status, body, _ = await client.post(_call(client))
    assert (status, "result" in body) == (200, True), body
    assert time.monotonic() - started < LEGIT_DEADLINE


async def _clients(running: Any, raw_client: Any, version: str = "2025-03-26") -> tuple[RawClient, RawClient]:
    attacker, legit = raw_client(running.url, make_token("acme")), raw_client(running.url, make_token("globex"))
    await attacker.initialize(version)
    await legit.initialize()
    return attacker, legit


# ---------------------------------------------------------------- item 2: batches


async def test_batch_members_are_charged_to_the_rate_limit(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(make_config([stdio_backend("calc")],
                                        tenants=_tenants(rate_limit={"requests_per_second": 2, "burst": 10})))
    attacker, legit = await _clients(running, raw_client)  # initialize + initialized: 2 of the 10
    ran = 0
    started = time.monotonic()
    while time.monotonic() - started < 2.0:  # the attack ran 3,300 calls in 2.4 s at 2/s
        status, body, headers = await attacker.post([_call(attacker) for _ in range(4)])
        if status == 200:
            ran += sum("result" in reply for reply in body)
        else:
            assert status == 429 and int(headers["Retry-After"]) >= 1
            await asyncio.sleep(0.1)
        await _legit_call(legit)
    assert 8 <= ran <= 16  # the burst left, then 2 a second (not thousands)


async def test_a_batch_over_the_tenant_batch_size_is_429(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(make_config([stdio_backend("calc")], tenants=_tenants(limits={"batch_size": 10})))
    attacker, legit = await _clients(running, raw_client)
    status, body, headers = await attacker.post([_call(attacker) for _ in range(11)])
    assert (status, body["error"]["data"], headers["Retry-After"]) == (
        429, {"reason": "limit", "limit": "batch_size"}, "1")
    status, body, _ = await attacker.post([_call(attacker) for _ in range(10)])
    assert status == 200 and len(body) == 10
    await _legit_call(legit)


# ---------------------------------------------------------------- requests in flight


async def test_requests_in_flight_beyond_the_budget_are_refused(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(make_config([stdio_backend("calc")], tenants=_tenants(limits={"in_flight": 2})))
    attacker, legit = await _clients(running, raw_client)
    slow = {"name": "calc__slow", "arguments": {"seconds": 1.5, "steps": 1}}
    busy = [asyncio.create_task(attacker.post(_call(attacker, slow))) for _ in range(2)]
    await asyncio.sleep(0.3)
    status, body, headers = await attacker.post(_call(attacker))
    assert (status, body["error"]["data"]["limit"], headers["Retry-After"]) == (429, "in_flight", "1")
    status, batch, _ = await attacker.post([_call(attacker), _call(attacker)])  # a batch: its members say so
    assert status == 200 and {r["error"]["data"]["reason"] for r in batch} == {"limit"}
    await _legit_call(legit)
    assert [(await task)[0] for task in busy] == [200, 200]
    assert "result" in (await attacker.post(_call(attacker)))[1]  # the budget is back


# ---------------------------------------------------------------- item 3: sessions


async def test_a_tenant_opening_sessions_evicts_only_its_own(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(make_config([stdio_backend("calc")], tenants=_tenants(),
                                        limits={"sessions": 50}))
    legit = raw_client(running.url, make_token("globex"))
    await legit.initialize()  # the least recently used session of all
    first = raw_client(running.url, make_token("acme"))
    await first.initialize()
    for _ in range(120):
        await raw_client(running.url, make_token("acme")).initialize()
    status, _, _ = await first.post(_call(first))
    assert status == 404  # evicted: the tenant's least recently used
    await _legit_call(legit)  # the other tenant's session lives on
    sessions = running.app[keys.SESSIONS]
    assert (sessions.count_of("acme"), sessions.count_of("globex")) == (50, 1)


# ---------------------------------------------------------------- streams


async def _open_stream(http: aiohttp.ClientSession, client: RawClient) -> aiohttp.ClientResponse:
    headers = {**client.headers(), "Accept": "text/event-stream"}
    return await http.get(client.url, headers=headers)


async def test_get_streams_beyond_the_tenant_budget_are_429(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(make_config([stdio_backend("calc")], tenants=_tenants(limits={"streams": 2})))
    clients = [raw_client(running.url, make_token("acme")) for _ in range(3)]
    for client in [*clients]:
        await client.initialize()
    legit = raw_client(running.url, make_token("globex"))
    await legit.initialize()
    async with aiohttp.ClientSession() as http:
        opened = [await _open_stream(http, client) for client in clients]
        legit_stream = await _open_stream(http, legit)
        assert [r.status for r in opened] + [legit_stream.status] == [200, 200, 429, 200]
        for response in (*opened, legit_stream):
            response.close()
    await _legit_call(legit)


# ---------------------------------------------------------------- item 7: stream state freed


def _hub(running: Any) -> Any:
    return running.app[keys.STREAMS]


async def test_stream_state_goes_with_its_session_when_it_idles_out(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(make_config([stdio_backend("calc")], server={"session_idle_seconds": 1}))
    clients = [raw_client(running.url, make_token("acme")) for _ in range(200)]
    async with aiohttp.ClientSession() as http:
        for client in clients:
            await client.initialize()
            (await _open_stream(http, client)).close()  # dropped at once: the entry stays for a resume
    await asyncio.sleep(0.2)
    for n in range(30):  # catalogue changes: each is kept in every session's replay history
        _hub(running).publish({"acme"}, {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                                         "params": {"n": n}})
    kept, attached = _hub(running).count()
    assert kept > 0 and attached == 0  # entries of dropped streams (the oldest may have idled out already)
    await until(lambda: _hub(running).count() == (0, 0), 5)  # idle after 1 s, swept every 0.25 s
    assert _hub(running).count() == (0, 0)
    assert running.app[keys.SESSIONS].count() == 0


async def test_an_evicted_session_ends_its_stream_and_frees_its_entry(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(make_config([stdio_backend("calc")], limits={"sessions": 3}))
    clients = [raw_client(running.url, make_token("acme")) for _ in range(5)]
    async with aiohttp.ClientSession() as http:
        streams = []
        for client in clients[:3]:
            await client.initialize()
            streams.append(await _open_stream(http, client))
        for client in clients[3:]:
            await client.initialize()  # each evicts the oldest session, whose stream ends
        ended = [await asyncio.wait_for(response.content.read(), 5) for response in streams[:2]]
        assert ended == [b"", b""]
        assert _hub(running).count() == (1, 1)
        for response in streams:
            response.close()


async def test_the_replay_history_of_a_session_is_bounded(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(make_config([stdio_backend("calc")]))
    client = raw_client(running.url, make_token("acme"))
    await client.initialize()
    async with aiohttp.ClientSession() as http:
        (await _open_stream(http, client)).close()
    hub = _hub(running)
    for n in range(1000):  # event ids 1..1000 of this hub
        hub.publish({"acme"}, {"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": n}})
    assert len(hub.replay(client.session_id, f"{hub.epoch}-{1000 - REPLAY_EVENTS // 2}")) == REPLAY_EVENTS // 2
    catch_up = hub.replay(client.session_id, f"{hub.epoch}-{1000 - 2 * REPLAY_EVENTS}")  # pushed out long ago
    # a resume the history cannot serve gets the catch-up: every kind's list_changed, so the client lists again
    assert [orjson.loads(data)["method"] for _, data in catch_up] == list(spec.LIST_CHANGED_ORDER)
