"""A served request leaves no reference cycle behind: its context, and the channel that holds the request,
are freed as the request ends, not by a later garbage collection (whose passes every call would pay for)."""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from conftest import RawClient, RunningGateway, StartGateway, make_config, make_token, stdio_backend
from stateless_client import StatelessClient

from gateway.tenancy import RequestContext

pytestmark = pytest.mark.timeout(60)

CALLS = 5
ADD = {"name": "calc__add", "arguments": {"a": 2, "b": 3}}


@pytest.fixture
async def running(gateway: StartGateway) -> RunningGateway:
    return await gateway(make_config([stdio_backend("calc")], tenants={"acme": {"backends": ["*"]}}))


async def _contexts_left(call: Callable[[], Awaitable[Any]]) -> list[RequestContext]:
    """The request contexts still alive after CALLS answered calls, the collector held off meanwhile."""
    await call()  # the first call's one-off state (connections, caches) is not counted
    gc.collect()
    gc.disable()
    try:
        for _ in range(CALLS):
            await call()
        return [thing for thing in gc.get_objects() if isinstance(thing, RequestContext)]
    finally:
        gc.enable()


async def test_a_2026_call_leaves_no_context_for_the_collector(running: RunningGateway) -> None:
    async with aiohttp.ClientSession() as session:
        client = StatelessClient(session, running.url, make_token("acme"))
        assert await _contexts_left(lambda: client.call("tools/call", ADD)) == []


async def test_a_session_call_leaves_no_context_for_the_collector(
        running: RunningGateway, raw_client: Callable[[str, str | None], RawClient]) -> None:
    client = raw_client(running.url, make_token("acme"))
    await client.initialize()
    assert await _contexts_left(lambda: client.call("tools/call", ADD)) == []
