"""A 2026 client's retry may reach another replica than the one whose backend call waits for it: the
retry's replica checks the state (the replicas share its key through Redis) and passes the answers
to the replica holding the round over the store's event channel, then returns what comes back. The assistant
is pinned to the handshake era so that its session-style questions are bridged (see e2e.test_mrtr.start)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import pytest
from backend_fixtures import StartBackend
from conftest import http_backend_config, make_token
from e2e.test_client_requests import TOOLS, Recorder
from e2e.test_mrtr import HOLDING
from e2e.test_mrtr_state import ACCEPT, CONFIRM, FORM, INVALID_STATE, answered, first_round, retry
from lifecycle.processes import API_KEY, GatewayProcess, free_port, gateway_config
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from stateless_client import StatelessClient

from gateway import keys
from shared_state.conftest import StartReplicas, needs_shared_redis, store_config

pytestmark = [pytest.mark.timeout(120), needs_shared_redis]


class RoundRobin(httpx2.AsyncBaseTransport):
    """A load balancer in front of the replicas: each request goes to the next one, in turn."""

    def __init__(self, urls: list[str]) -> None:
        self.targets = itertools.cycle([httpx2.URL(url) for url in urls])
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        target = next(self.targets)
        request.url = request.url.copy_with(host=target.host, port=target.port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def balanced(urls: list[str], token: str, **callbacks: Any) -> AsyncIterator[Client]:
    """The SDK client at 2026-07-28 behind a round-robin balancer: a call and its retry land on different replicas."""
    async with httpx2.AsyncClient(transport=RoundRobin(urls), headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(30, read=60)) as http, \
            Client(streamable_http_client(urls[0], http_client=http), mode="auto", read_timeout_seconds=30,
                   **callbacks) as client:
        assert client.protocol_version == "2026-07-28"
        yield client


async def test_the_replicas_share_one_state_key_through_redis_unless_one_is_configured(
        replicas: StartReplicas, http_backend: StartBackend, shared_redis: Any, redis_prefix: str) -> None:
    assistant = await http_backend("assistant")
    a, b = await replicas(2, [http_backend_config("web", assistant.url, protocol="handshake")])
    stored = await shared_redis.get(f"{redis_prefix}mrtr:key")
    assert stored and a.app[keys.ROUNDS].seal.keys[0] == b.app[keys.ROUNDS].seal.keys[0] == stored
    secret = "s" * 40
    c, = await replicas(1, [http_backend_config("web", assistant.url, protocol="handshake")], mrtr={"secret": secret})
    assert c.app[keys.ROUNDS].seal.keys == [secret.encode()]


async def test_a_retry_on_b_reaches_the_call_held_on_a(
        replicas: StartReplicas, http_backend: StartBackend) -> None:
    assistant = await http_backend("assistant")
    a, b = await replicas(2, [http_backend_config("web", assistant.url, protocol="handshake")])
    async with aiohttp.ClientSession() as session:
        on_a, on_b = (StatelessClient(session, replica.url, make_token("acme")) for replica in (a, b))
        message, result = await first_round(on_a)
        assert len(a.app[keys.ROUNDS]) == 1
        resumed = retry(on_b, message, result["requestState"], answered(result))
        status, body, _ = await on_b.post(resumed)
        assert status == 200, body
        assert body["result"]["content"][0]["text"] == "confirmed=True note=raw"
        assert body["id"] == resumed["id"]  # the retry's own id, not the first request's
        assert len(a.app[keys.ROUNDS]) == 0 and a.app[keys.EXCHANGE].busy["acme"] == 0
        replayed = retry(on_b, message, result["requestState"], answered(result))
        status, body, _ = await on_b.post(replayed)  # B asks A, which no longer holds the round
        assert (status, body.get("error")) == (400, INVALID_STATE)


async def test_b_refuses_a_tampered_state_without_asking_a(
        replicas: StartReplicas, http_backend: StartBackend) -> None:
    assistant = await http_backend("assistant")
    a, b = await replicas(2, [http_backend_config("web", assistant.url, protocol="handshake")])
    async with aiohttp.ClientSession() as session:
        on_a, on_b = (StatelessClient(session, replica.url, make_token("acme")) for replica in (a, b))
        mallory = StatelessClient(session, b.url, make_token("acme", sub="mallory"))
        message, result = await first_round(on_a, CONFIRM, FORM)
        state = result["requestState"]
        for client, forged in ((on_b, retry(on_b, message, state[:-3] + "abc", {"x": ACCEPT})),
                               (mallory, retry(mallory, message, state, answered(result)))):
            status, body, _ = await client.post(forged)
            assert (status, body.get("error")) == (400, INVALID_STATE)
        status, body, _ = await on_b.post(retry(on_b, message, state, answered(result)))
        assert status == 200 and body["result"]["content"][0]["text"] == "confirmed=True note=raw"


async def test_the_sdk_client_behind_a_balancer_gets_every_answer_through(
        replicas: StartReplicas, http_backend: StartBackend) -> None:
    assistant = await http_backend("assistant")
    a, b = await replicas(2, [http_backend_config("web", assistant.url, protocol="handshake")])
    asked = Recorder()
    async with balanced([a.url, b.url], make_token("acme"), **asked.callbacks()) as client:
        got = [(await client.call_tool(f"web__{tool}", args)).model_dump() for tool, args in TOOLS]
    assert all(not result["is_error"] for result in got), got
    assert got[1]["content"][0]["text"] == "confirmed=True note=client"
    assert [kind for kind, _ in asked.asked] == ["sampling", "elicitation", "elicitation", "roots"]
    assert len(a.app[keys.ROUNDS]) == len(b.app[keys.ROUNDS]) == 0


async def test_progress_of_a_call_held_on_a_reaches_its_retry_on_b(
        replicas: StartReplicas, http_backend: StartBackend) -> None:
    holding = {"name": "hold", "transport": "stdio", "command": HOLDING}
    a, b = await replicas(2, [holding])
    seen: list[str | None] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async with balanced([a.url, b.url], make_token("acme"), **Recorder().callbacks()) as client:
        result = await client.call_tool("hold__hold", {"then_sleep": 0.2}, progress_callback=progress)
    assert result.content[0].text == "accept"
    assert seen == ["answered", "done"]  # sent by the call on one replica, over Redis, out of the other


async def test_two_gateway_processes_on_one_redis(
        redis_prefix: str, http_backend: StartBackend, tmp_path: Path) -> None:
    """`python -m gateway serve` twice, sharing the real Redis: nothing in-process is shared."""
    assistant = await http_backend("assistant")
    processes: list[GatewayProcess] = []
    try:
        for index in range(2):
            port, directory = free_port(), tmp_path / f"replica{index}"
            directory.mkdir()
            web = http_backend_config("web", assistant.url, protocol="handshake")
            config = gateway_config(directory, port=port, backends=[web],
                                    store=store_config("redis://127.0.0.1:6379/0", redis_prefix))
            processes.append(await GatewayProcess.start(config, port))
        for process in processes:
            await process.wait_ready()
        asked = Recorder()
        async with balanced([process.url() for process in processes], API_KEY, **asked.callbacks()) as client:
            confirmed = await client.call_tool("web__confirm", {"action": "ship it"})
            summary = await client.call_tool("web__summarize", {"text": "two replicas, one call"})
        assert confirmed.content[0].text == "confirmed=True note=client"
        assert summary.content[0].text == "client: 1 message(s)"
        # the balancer alternates, so the requests in the order they came are the two logs interleaved
        lines = [[(e.get("method"), e.get("outcome")) for e in p.events() if e.get("event") == "request"]
                 for p in processes]
        sequence = [line for pair in zip(*lines, strict=False) for line in pair]
        held = [i for i, line in enumerate(sequence) if line == ("tools/call", "input_required")]
        assert len(held) == 2, [p.output() for p in processes]
        assert all(sequence[i + 1] == ("tools/call", "ok") for i in held), sequence  # resumed on the other one
    finally:
        for process in processes:
            await process.stop()
