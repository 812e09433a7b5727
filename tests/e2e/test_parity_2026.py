"""The official SDK client through the gateway at 2026-07-28 (`mode="auto"` probes server/discover) and in a
session (`mode="legacy"`), in front of handshake-era backends over stdio and over HTTP: the same tools,
the same results, progress on the way."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from backend_fixtures import StartBackend
from conftest import RunningGateway, StartGateway, http_backend_config, make_config, make_token, stdio_backend
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.timeout(120)

ROUTED = [sys.executable, str(Path(__file__).resolve().parents[1] / "transport" / "routed_tool_server.py")]
MODES = ["auto", "legacy"]
BACKENDS = ["calc", "hcalc"]  # the calc backend over stdio, and the same over HTTP


@pytest.fixture
async def running(http_backend: StartBackend, gateway: StartGateway) -> RunningGateway:
    calc_over_http = await http_backend("calc")
    return await gateway(make_config([
        stdio_backend("calc"),
        http_backend_config("hcalc", calc_over_http.url),
        {"name": "routed", "transport": "stdio", "command": ROUTED},
    ]))


@asynccontextmanager
async def sdk(running: RunningGateway, mode: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {make_token('acme')}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
        transport = streamable_http_client(running.url, http_client=http)
        async with Client(transport, mode=mode, read_timeout_seconds=30) as client:  # type: ignore[arg-type]
            yield client


async def test_auto_mode_finds_the_2026_path_and_legacy_mode_a_session(running: RunningGateway) -> None:
    async with sdk(running, "auto") as modern, sdk(running, "legacy") as legacy:
        assert modern.protocol_version == "2026-07-28"
        assert legacy.protocol_version == "2025-11-25"
        assert modern.server_info is not None and modern.server_info.name == "mcp-gateway"
        assert modern.server_capabilities.tools is not None
        assert modern.instructions == legacy.instructions


async def test_both_eras_list_the_same_tools(running: RunningGateway) -> None:
    async with sdk(running, "auto") as modern, sdk(running, "legacy") as legacy:
        listed = {t.name: t.model_dump() for t in (await modern.list_tools()).tools}
        assert listed == {t.name: t.model_dump() for t in (await legacy.list_tools()).tools}
    assert {"calc__add", "hcalc__add", "routed__locate"} <= set(listed)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_call_returns_the_backends_result(running: RunningGateway, mode: str, backend: str) -> None:
    async with sdk(running, mode) as client:
        result = await client.call_tool(f"{backend}__add", {"a": 2, "b": 3})
    assert not result.is_error and result.structured_content == {"result": 5.0}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_progress_reaches_the_caller(running: RunningGateway, mode: str, backend: str) -> None:
    progress: list[tuple[float, float | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total))

    async with sdk(running, mode) as client:
        result = await client.call_tool(f"{backend}__slow", {"seconds": 0.3, "steps": 3},
                                        progress_callback=on_progress)
    assert not result.is_error
    assert progress == [(1, 3), (2, 3), (3, 3)]


async def test_the_sdk_sends_param_headers_the_gateway_checks_and_accepts(running: RunningGateway) -> None:
    async with sdk(running, "auto") as client:
        await client.list_tools()  # the client learns which arguments to repeat as headers
        result = await client.call_tool("routed__locate", {"region": "zürich", "count": 4, "note": "n"})
    assert not result.is_error
    assert [block.model_dump()["text"] for block in result.content] == ["zürich:4:n"]


@pytest.mark.parametrize(("tool", "arguments"), [
    ("calc__evaluate", {"expression": "1 +"}),  # the backend's tool error
    ("calc__add", {"a": "two", "b": 1}),  # arguments the gateway finds invalid before any backend sees them
])
async def test_a_tool_error_reaches_both_eras_alike(
        running: RunningGateway, tool: str, arguments: dict[str, Any]) -> None:
    results: list[Any] = []
    for mode in MODES:
        async with sdk(running, mode) as client:
            results.append(await client.call_tool(tool, arguments))
    assert all(result.is_error for result in results)
    assert results[0].content == results[1].content
