"""A client's `notifications/roots/list_changed` reaches the backends that may ask it for roots, through a
session (official SDK client, legacy mode); a client that declared no roots sends nothing on. Over HTTP,
only the backend session of the sender's tenant and declared capabilities hears it."""

from __future__ import annotations

import asyncio
import sys
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from backend_fixtures import RunningBackend, start_http_backend
from conftest import RunningGateway, StartGateway, http_backend_config, make_config, make_token
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ListRootsResult, Root

pytestmark = pytest.mark.timeout(60)

SERVER = [sys.executable, str(Path(__file__).with_name("roots_backend.py"))]


@pytest.fixture
async def running(gateway: StartGateway) -> RunningGateway:
    return await gateway(make_config([{"name": "roots", "transport": "stdio", "command": SERVER}]))


async def list_roots(context: Any) -> ListRootsResult:
    return ListRootsResult(roots=[Root(uri="file:///work", name="work")])


@pytest.fixture
async def roots_over_http() -> AsyncIterator[RunningBackend]:
    backend = await start_http_backend("roots", script=Path(SERVER[1]))
    try:
        yield backend
    finally:
        await backend.stop()


@asynccontextmanager
async def sdk(running: RunningGateway, tenant: str = "acme", **callbacks: Any) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {make_token(tenant)}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
        transport = streamable_http_client(running.url, http_client=http)
        async with Client(transport, mode="legacy", read_timeout_seconds=30, **callbacks) as client:
            yield client


async def heard(client: Client, tool: str = "roots__changes") -> int:
    result = await client.call_tool(tool, {})
    return int(result.content[0].text)  # type: ignore[union-attr]


async def test_a_roots_change_reaches_the_backend_only_from_a_client_with_roots(running: RunningGateway) -> None:
    with warnings.catch_warnings():  # roots are deprecated at 2026-07-28, not in the session era used here
        warnings.simplefilter("ignore")
        async with sdk(running) as without, sdk(running, list_roots_callback=list_roots) as with_roots:
            assert await heard(without) == 0
            await without.send_roots_list_changed()  # declared no roots: nothing to tell any backend
            await asyncio.sleep(0.5)
            assert await heard(without) == 0
            await with_roots.send_roots_list_changed()
            for _ in range(100):  # the notification is answered 202 at once; the backend hears it soon after
                if await heard(with_roots) == 1:
                    break
                await asyncio.sleep(0.05)
            assert await heard(with_roots) == 1


async def test_over_http_only_the_senders_backend_session_hears_it(
        gateway: StartGateway, roots_over_http: RunningBackend) -> None:
    everyone = {"backends": ["*"]}
    running = await gateway(make_config([http_backend_config("hroots", roots_over_http.url)],
                                        tenants={"acme": everyone, "globex": everyone}))
    tool = "hroots__changes"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        async with sdk(running, list_roots_callback=list_roots) as sender, \
                sdk(running, list_roots_callback=list_roots) as same_session, \
                sdk(running, "globex", list_roots_callback=list_roots) as other_tenant, \
                sdk(running) as no_roots:
            for client in (sender, other_tenant, no_roots):  # each backend session exists before the change
                assert await heard(client, tool) == 0
            await sender.send_roots_list_changed()
            for _ in range(100):
                if await heard(same_session, tool) == 1:  # acme's clients that declared roots share a session
                    break
                await asyncio.sleep(0.05)
            assert await heard(same_session, tool) == 1
            assert await heard(other_tenant, tool) == 0
            assert await heard(no_roots, tool) == 0
