"""Catalog backend: many generated tools behind a server-paginated ``tools/list``.

Built on the SDK's low-level ``Server`` because the high-level one always returns every
tool in one page. Tools are ``<prefix>000 .. <prefix>{N-1}`` (default prefix ``tool_``);
calling one with ``{"x": 7}`` returns the text ``"<name>:7"``.

Pages hold ``--page-size`` tools and link with opaque cursors; a cursor this server did not
issue is answered with JSON-RPC ``-32602``. If ``CATALOG_TOOLS_FILE`` names a file, the
tool count is re-read from it on every request, so tests can change the list while the
server runs (no ``list_changed`` notification is sent or advertised).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from . import runner

logger = logging.getLogger(__name__)

TOOLS_FILE_ENV = "CATALOG_TOOLS_FILE"
INPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"x": {"type": "integer"}}}
_CURSOR_TAG = "catalog-offset:"
_MAX_DIGITS = 9  # bounds int() on client-supplied digits in cursors and tool names


def _is_number(text: str) -> bool:
    """True for 1 to 9 ASCII digits."""
    return 0 < len(text) <= _MAX_DIGITS and text.isascii() and text.isdigit()


def encode_cursor(offset: int) -> str:
    """Opaque cursor for the page that starts at ``offset``."""
    return base64.urlsafe_b64encode(f"{_CURSOR_TAG}{offset}".encode()).decode()


def decode_cursor(cursor: str) -> int:
    """Offset inside a cursor from :func:`encode_cursor`; ``-32602`` for anything else."""
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("ascii")
    except (UnicodeError, binascii.Error, ValueError):
        text = ""
    digits = text.removeprefix(_CURSOR_TAG)
    if text == digits or not _is_number(digits):
        raise MCPError(code=types.INVALID_PARAMS, message="Invalid cursor")
    return int(digits)


@dataclass(frozen=True)
class Catalog:
    """The generated tool set and its paging rules."""

    tool_count: int
    page_size: int = 10
    prefix: str = "tool_"
    tools_file: Path | None = None

    def count(self) -> int:
        """Current number of tools: from ``tools_file`` when set, else fixed."""
        if self.tools_file is None:
            return self.tool_count
        try:
            return max(0, int(self.tools_file.read_text().strip()))
        except (OSError, ValueError) as exc:
            logger.warning("cannot read tool count from %s: %s", self.tools_file, exc)
            raise MCPError(code=types.INTERNAL_ERROR, message="Tool count unavailable") from exc

    def name(self, index: int) -> str:
        return f"{self.prefix}{index:03d}"

    def index_of(self, name: str) -> int | None:
        """Index of a currently listed tool ``name``, or None."""
        digits = name[len(self.prefix) :]
        if not name.startswith(self.prefix) or not _is_number(digits):
            return None
        index = int(digits)
        return index if self.name(index) == name and index < self.count() else None

    def tool(self, index: int) -> types.Tool:
        return types.Tool(
            name=self.name(index),
            description=f"Generated tool number {index}; echoes its name and x.",
            input_schema=INPUT_SCHEMA,
        )

    def page(self, cursor: str | None) -> types.ListToolsResult:
        """One page of tools starting at ``cursor`` (the first page when None)."""
        start = 0 if cursor is None else decode_cursor(cursor)
        total = self.count()
        end = min(start + self.page_size, total)
        tools = [self.tool(i) for i in range(start, end)]
        next_cursor = encode_cursor(end) if end < total else None
        return types.ListToolsResult(tools=tools, next_cursor=next_cursor)

    def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        """Run a generated tool; unknown names are a protocol error, bad input a tool error."""
        if self.index_of(name) is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")
        x = (arguments or {}).get("x", 0)
        if not isinstance(x, int) or isinstance(x, bool):
            return _text_result("x must be an integer", is_error=True)
        return _text_result(f"{name}:{x}")


def _text_result(text: str, *, is_error: bool = False) -> types.CallToolResult:
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
    return types.CallToolResult(content=content, is_error=is_error)


def build_server(catalog: Catalog) -> Server[Any]:
    """A low-level SDK server whose handlers delegate to ``catalog``."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return catalog.page(params.cursor if params else None)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        return catalog.call(params.name, params.arguments)

    def input_schema(name: str) -> dict[str, Any] | None:
        return INPUT_SCHEMA if catalog.index_of(name) is not None else None

    return Server(
        "catalog",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=input_schema,
    )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = runner.base_parser("catalog", "Catalog MCP backend (paginated generated tools)")
    parser.add_argument("--tools", type=_non_negative, default=25, help="number of tools")
    parser.add_argument("--page-size", type=_positive, default=10, help="tools per page")
    parser.add_argument("--prefix", default="tool_", help="tool name prefix")
    args = parser.parse_args(argv)
    tools_file = os.environ.get(TOOLS_FILE_ENV)
    catalog = Catalog(
        tool_count=args.tools,
        page_size=args.page_size,
        prefix=args.prefix,
        tools_file=Path(tools_file) if tools_file else None,
    )
    runner.run(build_server(catalog), args)


if __name__ == "__main__":
    main()
