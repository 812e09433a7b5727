"""The official SDK client gets the same tools and results direct and through the gateway."""

from __future__ import annotations

from typing import Any

import pytest
from backend_fixtures import REPO_ROOT, StartBackend, stdio_command
from conftest import StartGateway, http_backend_config, make_config, make_token, sdk_client, stdio_backend
from mcp import Client
from mcp.client.stdio import StdioServerParameters

pytestmark = pytest.mark.timeout(90)

SCENARIOS: list[tuple[str, str, dict[str, Any]]] = [
    ("clock", "convert", {"time": "2026-01-01T12:00:00", "from_zone": "UTC", "to_zone": "Asia/Tokyo"}),
    ("notes", "search_notes", {"query": "nothing-matches-this"}),
    ("calc", "evaluate", {"expression": "(2 + 3) * 7 - 2 ** 3"}),
    ("calc", "convert_units", {"value": 100, "from_unit": "c", "to_unit": "f"}),
    ("clock", "now", {"timezone": "Not/AZone"}),  # a tool error passes through as isError
]


@pytest.fixture
async def topology(http_backend: StartBackend, gateway: StartGateway) -> dict[str, Any]:
    """Two HTTP backends (clock, notes) and one stdio backend (calc) behind one gateway."""
    clock = await http_backend("clock")
    notes = await http_backend("notes")
    config = make_config([
        http_backend_config("clock", clock.url),
        http_backend_config("notes", notes.url),
        stdio_backend("calc"),
    ])
    running = await gateway(config)
    return {"gateway": running, "urls": {"clock": clock.url, "notes": notes.url}}


async def _direct_tools(topology: dict[str, Any], backend: str) -> dict[str, Any]:
    async with _direct(topology, backend) as client:
        return {t.name: t for t in (await client.list_tools()).tools}


def _direct(topology: dict[str, Any], backend: str) -> Any:
    if backend == "calc":
        command = stdio_command("calc")
        return Client(StdioServerParameters(command=command[0], args=command[1:], cwd=REPO_ROOT), mode="legacy")
    from conftest import sdk_client as direct_client

    return direct_client(topology["urls"][backend])


async def test_the_merged_list_is_every_backend_tool_prefixed_and_otherwise_unchanged(topology: dict[str, Any]) -> None:
    async with sdk_client(topology["gateway"].url, make_token("acme")) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    expected_names = set()
    for backend in ("clock", "notes", "calc"):
        for name, tool in (await _direct_tools(topology, backend)).items():
            exposed = f"{backend}__{name}"
            expected_names.add(exposed)
            through = listed[exposed]
            assert through.model_dump(exclude={"name"}) == tool.model_dump(exclude={"name"})
    assert set(listed) == expected_names


@pytest.mark.parametrize(("backend", "tool", "arguments"), SCENARIOS)
async def test_a_call_through_the_gateway_returns_what_the_backend_returns(
    topology: dict[str, Any], backend: str, tool: str, arguments: dict[str, Any]
) -> None:
    async with _direct(topology, backend) as client:
        direct = await client.call_tool(tool, arguments)
    async with sdk_client(topology["gateway"].url, make_token("acme")) as client:
        through = await client.call_tool(f"{backend}__{tool}", arguments)
    assert through.model_dump() == direct.model_dump()


async def test_state_kept_by_a_backend_is_seen_through_the_gateway(topology: dict[str, Any]) -> None:
    async with sdk_client(topology["gateway"].url, make_token("acme")) as client:
        created = await client.call_tool("notes__create_note", {"title": "hello", "body": "world"})
        assert not created.is_error
        found = await client.call_tool("notes__search_notes", {"query": "hello"})
    assert "world" in str(found.model_dump())
