"""Multi-round trips: a 2026-07-28 client (no server-to-client requests) calls tools of a handshake-era
backend that ask their client for sampling, elicitation and roots while they run. The gateway turns
each question into an `InputRequiredResult`, holds the backend call open, and hands the client's
retried answers back to it: the official SDK client in `mode="auto"` sees what a legacy client sees."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import pytest
from backend_fixtures import REPO_ROOT, StartBackend, stdio_command
from conftest import RunningGateway, StartGateway, http_backend_config, make_config, make_token
from e2e.test_client_requests import TOOLS, Recorder, direct
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from stateless_client import StatelessClient

from gateway import keys

pytestmark = pytest.mark.timeout(120)

HOLDING = [sys.executable, str(Path(__file__).with_name("holding_backend.py"))]
EVERY_BACKEND = {"backends": ["*"]}


@pytest.fixture
async def topology(http_backend: StartBackend, gateway: StartGateway) -> dict[str, Any]:
    """The assistant backend over HTTP (`web`) and as a stdio child (`local`), and a backend whose tool
    waits for an answer and records how its wait ended (`hold`), behind one gateway whose rounds wait 3 s."""
    web = await http_backend("assistant")
    local = {"name": "local", "transport": "stdio", "command": stdio_command("assistant"), "cwd": str(REPO_ROOT)}
    hold = {"name": "hold", "transport": "stdio", "command": HOLDING}
    config = make_config([http_backend_config("web", web.url), local, hold],
                         tenants={"acme": EVERY_BACKEND, "globex": EVERY_BACKEND}, mrtr={"round_seconds": 3})
    return {"gateway": await gateway(config), "web": web.url}


@asynccontextmanager
async def modern(running: RunningGateway, token: str, **callbacks: Any) -> AsyncIterator[Client]:
    """The SDK client at 2026-07-28 (`mode="auto"` finds it by server/discover)."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(30, read=60)) as http:
        async with Client(streamable_http_client(running.url, http_client=http), mode="auto",
                          read_timeout_seconds=30, **callbacks) as client:
            assert client.protocol_version == "2026-07-28"
            yield client


@asynccontextmanager
async def raw(running: RunningGateway, token: str) -> AsyncIterator[StatelessClient]:
    async with aiohttp.ClientSession() as session:
        yield StatelessClient(session, running.url, token)


@pytest.mark.parametrize("backend", ["web", "local"])
async def test_the_sdk_client_at_2026_answers_in_rounds_what_a_legacy_client_answers_live(
        topology: dict[str, Any], backend: str) -> None:
    mine, theirs = Recorder(), Recorder()
    async with direct(topology, backend, **theirs.callbacks()) as client:
        expected = [(await client.call_tool(tool, args)).model_dump() for tool, args in TOOLS]
    async with modern(topology["gateway"], make_token("acme"), **mine.callbacks()) as client:
        got = [(await client.call_tool(f"{backend}__{tool}", args)).model_dump() for tool, args in TOOLS]
    assert [result["content"] for result in got] == [result["content"] for result in expected]
    assert all(not result["is_error"] for result in got), got
    assert mine.asked == theirs.asked
    assert [kind for kind, _ in mine.asked] == ["sampling", "elicitation", "elicitation", "roots"]
    assert len(topology["gateway"].app[keys.ROUNDS]) == 0  # every held call ended with its result
