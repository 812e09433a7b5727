"""Multi-round trips: a 2026-07-28 client (no server-to-client requests) calls tools of a handshake-era
backend that ask their client for sampling, elicitation and roots while they run. The gateway turns
each question into an `InputRequiredResult`, holds the backend call open, and hands the client's
retried answers back to it: the official SDK client in `mode="auto"` sees what a legacy client sees."""

from __future__ import annotations

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


async def start(http_backend: StartBackend, gateway: StartGateway, **mrtr: Any) -> dict[str, Any]:
    """The assistant backend over HTTP (`web`) and as a stdio child (`local`), and the holding backend
    (`hold`, stdio: its tools, prompt and resource ask their client), behind one gateway. `web` is pinned to
    the handshake era: the assistant serves both eras, so `auto` would meet a 2026 client at 2026, where its
    session-style questions (ctx.elicit) have no back-channel, as directly; pinned, the gateway bridges them."""
    web = await http_backend("assistant")
    local = {"name": "local", "transport": "stdio", "command": stdio_command("assistant"), "cwd": str(REPO_ROOT)}
    hold = {"name": "hold", "transport": "stdio", "command": HOLDING}
    config = make_config([http_backend_config("web", web.url, protocol="handshake"), local, hold],
                         tenants={"acme": EVERY_BACKEND, "globex": EVERY_BACKEND}, mrtr=mrtr)
    return {"gateway": await gateway(config), "web": web.url}


@pytest.fixture
async def topology(http_backend: StartBackend, gateway: StartGateway) -> dict[str, Any]:
    """`start`'s gateway, whose rounds wait 3 s for a retry."""
    return await start(http_backend, gateway, round_seconds=3)


@asynccontextmanager
async def modern(running: RunningGateway, token: str, **callbacks: Any) -> AsyncIterator[Client]:
    """The SDK client at 2026-07-28 (`mode="auto"` finds it by server/discover)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http, \
            Client(streamable_http_client(running.url, http_client=http), mode="auto", read_timeout_seconds=30,
                   **callbacks) as client:
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


async def test_a_prompt_and_a_resource_ask_in_rounds_too(topology: dict[str, Any]) -> None:
    asked = Recorder()
    async with modern(topology["gateway"], make_token("acme"), **asked.callbacks()) as client:
        prompt = await client.get_prompt("hold__asked", {"topic": "tides"})
        read = await client.read_resource("hold+hold://answer/tides")
    assert prompt.messages[0].content.text == "client: 1 message(s)"  # what the sampling callback wrote
    assert read.contents[0].text == "tides: accept"
    assert read.ttl_ms == 0  # a retry's result is never cached (the first reply was an InputRequiredResult)
    assert [kind for kind, _ in asked.asked] == ["sampling", "elicitation"]


async def test_a_call_may_take_several_rounds(topology: dict[str, Any]) -> None:
    asked = Recorder()
    async with modern(topology["gateway"], make_token("acme"), **asked.callbacks()) as client:
        result = await client.call_tool("hold__twice", {})
    assert result.content[0].text == "accept accept"
    assert [params["message"] for _, params in asked.asked] == ["Question 1?", "Question 2?"]


async def test_beyond_max_rounds_the_backend_is_refused_and_the_call_completes(
        http_backend: StartBackend, gateway: StartGateway) -> None:
    running = (await start(http_backend, gateway, max_rounds=1))["gateway"]
    async with modern(running, make_token("acme"), **Recorder().callbacks()) as client:
        result = await client.call_tool("hold__twice", {})
    assert result.content[0].text == "accept refused"


async def test_progress_after_an_answer_reaches_the_retry_under_its_own_token(topology: dict[str, Any]) -> None:
    seen: list[tuple[float, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, message))

    async with modern(topology["gateway"], make_token("acme"), **Recorder().callbacks()) as client:
        result = await client.call_tool("hold__hold", {"then_sleep": 0.2}, progress_callback=progress)
    assert result.content[0].text == "accept"
    assert seen == [(1, "answered"), (2, "done")]  # the SDK drops progress under a token it did not send
