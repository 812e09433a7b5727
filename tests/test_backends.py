"""The demo backends, driven by the official SDK client over stdio and Streamable HTTP.

Every backend runs as a real subprocess (``python -m gateway.demo.<name>``). ``mode="legacy"``
makes the client do the ``initialize`` handshake, which is what the gateway speaks to
backends; one test also runs the SDK's default ``mode="auto"`` (2026-07-28 discovery).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Protocol

import pytest
from backend_fixtures import REPO_ROOT, StartBackend, http_backend, stdio_command
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent

from gateway.demo import calc, catalog

__all__ = ["http_backend"]  # re-exported so pytest finds the fixture in this module

pytestmark = pytest.mark.timeout(60)

TRANSPORTS = ["stdio", "http"]
EXPECTED_TOOLS = {
    "clock": {"now", "convert", "list_timezones"},
    "calc": {"add", "multiply", "evaluate", "convert_units", "slow"},
    "notes": {"create_note", "list_notes", "get_note", "delete_note", "search_notes", "link_note"},
    "catalog": {f"tool_{i:03d}" for i in range(25)},
}


class Connect(Protocol):
    """Signature of the ``connect`` fixture's value."""

    def __call__(
        self,
        transport: str,
        name: str,
        *args: str,
        env: dict[str, str] | None = None,
        mode: str = "legacy",
    ) -> AbstractAsyncContextManager[Client]: ...


@pytest.fixture
def connect(http_backend: StartBackend) -> Connect:
    """``connect(transport, name, *args, env=None, mode="legacy")``: a connected SDK client."""

    @asynccontextmanager
    async def open_client(
        transport: str,
        name: str,
        *args: str,
        env: dict[str, str] | None = None,
        mode: str = "legacy",
    ) -> AsyncIterator[Client]:
        if transport == "stdio":
            command = stdio_command(name, *args)
            params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=REPO_ROOT)
            async with Client(params, mode=mode, read_timeout_seconds=20) as client:
                yield client
        else:
            backend = await http_backend(name, *args, env=env)
            transport_cm = streamable_http_client(backend.url)
            async with Client(transport_cm, mode=mode, read_timeout_seconds=20) as client:
                yield client

    return open_client


def text_of(result: CallToolResult) -> str:
    """The text of a result's first content block."""
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def all_tool_names(client: Client) -> list[str]:
    """Follow ``next_cursor`` across every page of ``tools/list``."""
    names: list[str] = []
    cursor: str | None = None
    for _ in range(100):  # a server that never ends its pages fails instead of hanging
        page = await client.list_tools(cursor=cursor)
        names.extend(tool.name for tool in page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return names
    raise AssertionError("tools/list never ended")


# --- every backend, both transports -------------------------------------------------------


async def check_clock(client: Client) -> None:
    result = await client.call_tool("now", {"timezone": "Asia/Tokyo"})
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["timezone"] == "Asia/Tokyo"
    assert result.structured_content["utc_offset"] == "+0900"


async def check_calc(client: Client) -> None:
    result = await client.call_tool("evaluate", {"expression": "(2 + 3) * 4 ** 2 % 7"})
    assert not result.is_error
    assert result.structured_content == {"result": 3.0}


async def check_notes(client: Client) -> None:
    created = await client.call_tool("create_note", {"title": "hello", "body": "world"})
    assert created.structured_content is not None
    note_id = created.structured_content["id"]
    fetched = await client.call_tool("get_note", {"id": note_id})
    assert fetched.structured_content == created.structured_content


async def check_catalog(client: Client) -> None:
    result = await client.call_tool("tool_003", {"x": 7})
    assert not result.is_error
    assert text_of(result) == "tool_003:7"


CHECKS = {"clock": check_clock, "calc": check_calc, "notes": check_notes, "catalog": check_catalog}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("name", sorted(CHECKS))
async def test_backend_lists_and_calls_tools(connect: Connect, transport: str, name: str) -> None:
    async with connect(transport, name) as client:
        assert set(await all_tool_names(client)) == EXPECTED_TOOLS[name]
        await CHECKS[name](client)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_modern_auto_mode_also_works(connect: Connect, transport: str) -> None:
    async with connect(transport, "calc", mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("add", {"a": 2, "b": 40})
        assert result.structured_content == {"result": 42.0}


# --- tool errors --------------------------------------------------------------------------


async def test_clock_publishes_output_schema_and_rejects_unknown_zone(connect: Connect) -> None:
    async with connect("stdio", "clock") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert tools["now"].output_schema is not None
        result = await client.call_tool("now", {"timezone": "Mars/Olympus_Mons"})
        assert result.is_error
        assert "Unknown time zone" in text_of(result)
        converted = await client.call_tool(
            "convert",
            {"time": "2024-01-15T12:00:00", "from_zone": "UTC", "to_zone": "America/New_York"},
        )
        assert converted.structured_content is not None
        assert converted.structured_content["iso"] == "2024-01-15T07:00:00-05:00"


async def test_notes_unknown_id_is_a_tool_error(connect: Connect) -> None:
    async with connect("http", "notes") as client:
        result = await client.call_tool("get_note", {"id": "note-404"})
        assert result.is_error
        assert "Unknown note id" in text_of(result)
        await client.call_tool("create_note", {"title": "Groceries", "body": "milk, eggs"})
        found = await client.call_tool("search_notes", {"query": "EGGS"})
        assert found.structured_content is not None
        assert [n["title"] for n in found.structured_content["notes"]] == ["Groceries"]


@pytest.mark.parametrize(
    "expression",
    ["__import__('os').system('true')", "abs(-1)", "x + 1", "1 / 0", "9 ** 9 ** 9", "1 < 2"],
)
async def test_calc_evaluate_refuses_anything_but_arithmetic(expression: str) -> None:
    async with Client(calc.server, mode="legacy") as client:  # in-process: pure tool logic
        result = await client.call_tool("evaluate", {"expression": expression})
    assert result.is_error


@pytest.mark.parametrize(
    ("expression", "value"),
    [("1 + 2 * 3", 7.0), ("-(2 ** 10) % 1000", 976.0), ("7 / 2", 3.5), ("2 ** -1", 0.5)],
)
def test_calc_safe_eval_values(expression: str, value: float) -> None:
    assert calc.safe_eval(expression) == value


@pytest.mark.parametrize(
    ("value", "src", "dst", "expected"),
    [(1, "mi", "km", 1.609344), (100, "C", "F", 212.0), (1, "lb", "g", 453.59237)],
)
async def test_calc_convert_units(value: float, src: str, dst: str, expected: float) -> None:
    async with Client(calc.server, mode="legacy") as client:
        args = {"value": value, "from_unit": src, "to_unit": dst}
        result = await client.call_tool("convert_units", args)
        assert result.structured_content == pytest.approx({"result": expected})
        mismatched = await client.call_tool("convert_units", {**args, "to_unit": "s"})
        assert mismatched.is_error


# --- progress -----------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_calc_slow_reports_progress(connect: Connect, transport: str) -> None:
    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async with connect(transport, "calc") as client:
        args = {"seconds": 0.3, "steps": 3}
        result = await client.call_tool("slow", args, progress_callback=on_progress)
    assert text_of(result) == "slept 0.3s in 3 steps"
    assert [(p, t) for p, t, _ in updates] == [(1, 3), (2, 3), (3, 3)]


# --- catalog pagination -------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_catalog_paginates_with_opaque_cursors(connect: Connect, transport: str) -> None:
    args = ("--tools", "23", "--page-size", "5", "--prefix", "gen.")
    async with connect(transport, "catalog", *args) as client:
        first = await client.list_tools()
        assert len(first.tools) == 5
        assert first.next_cursor is not None
        assert first.tools[0].input_schema == catalog.INPUT_SCHEMA
        names = await all_tool_names(client)
        assert names == [f"gen.{i:03d}" for i in range(23)]
        with pytest.raises(MCPError) as bad_cursor:
            await client.list_tools(cursor="not-a-cursor")
        assert bad_cursor.value.code == INVALID_PARAMS
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("gen.023", {"x": 1})
        assert unknown.value.code == INVALID_PARAMS


async def test_catalog_rereads_tool_count_file(connect: Connect, tmp_path: Path) -> None:
    count_file = tmp_path / "count"
    count_file.write_text("3")
    env = {catalog.TOOLS_FILE_ENV: str(count_file)}
    async with connect("http", "catalog", "--page-size", "4", env=env) as client:
        assert len(await all_tool_names(client)) == 3
        count_file.write_text("9\n")
        assert len(await all_tool_names(client)) == 9
        assert text_of(await client.call_tool("tool_008", {"x": -1})) == "tool_008:-1"


def test_catalog_cursor_round_trip() -> None:
    assert catalog.decode_cursor(catalog.encode_cursor(40)) == 40
    for bad in ["", "x", "Y2F0YWxvZw==", "\u00e9"]:
        with pytest.raises(MCPError):
            catalog.decode_cursor(bad)


# --- the fixture itself -------------------------------------------------------------------


async def test_http_backend_restart_keeps_url(http_backend: StartBackend) -> None:
    backend = await http_backend("clock")
    url = backend.url
    await backend.restart()
    assert backend.url == url
    async with Client(streamable_http_client(url), mode="legacy") as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == EXPECTED_TOOLS["clock"]
    await backend.stop()
    assert backend.process is None
