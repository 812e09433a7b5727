"""Search mode's two gateway tools (catalogue.discovery): `find_tools` answered here, `call_tool` unwrapped
into the call of the tool it names (dispatch.tools runs that call as if it had come directly)."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.catalogue.arguments import SchemaCheck
from gateway.catalogue.discovery import CALL_TOOL_TOOL, FIND_TOOLS, find_tools_tool, found_tool
from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.views import TenantView
from gateway.config import SearchConfig
from gateway.protocol.jsonrpc import JsonObject


class SearchTools:
    """find_tools and call_tool of one search configuration (their schemas are checked strictly)."""

    def __init__(self, catalogue: CatalogueService) -> None:
        self.catalogue = catalogue
        self._checks: dict[SearchConfig, SchemaCheck] = {}
        self._call_check = SchemaCheck(CALL_TOOL_TOOL["inputSchema"])

    async def find(self, view: TenantView, arguments: dict[str, Any]) -> JsonObject | str:
        """find_tools' result, or what is wrong with its arguments."""
        search = view.search
        assert search is not None
        problem = self._find_check(search).problem(arguments)
        if problem:
            return f"Invalid arguments for tool {FIND_TOOLS}: {problem}"
        entries = await self.catalogue.find(view, arguments["query"], arguments.get("limit", search.results))
        tools, size, truncated = [], 0, False
        for entry in entries:
            tool = found_tool(view.tool_json(entry))
            size += len(orjson.dumps(tool))
            if tools and size > search.max_bytes:  # bounded: the first always goes, the rest while they fit
                truncated = True
                break
            tools.append(tool)
        found: JsonObject = {"tools": tools, **({"truncated": True} if truncated else {})}
        return {"content": [{"type": "text", "text": orjson.dumps(found).decode()}], "structuredContent": found}

    def unwrap(self, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]] | str:
        """call_tool's target and its arguments, or what is wrong with call_tool's own arguments."""
        problem = self._call_check.problem(arguments)
        if problem:
            return f"Invalid arguments for tool {CALL_TOOL_TOOL['name']}: {problem}"
        return arguments["name"], arguments.get("arguments") or {}

    def _find_check(self, search: SearchConfig) -> SchemaCheck:
        check = self._checks.get(search)
        if check is None:
            schema = find_tools_tool(search.results, search.max_results)["inputSchema"]
            check = self._checks[search] = SchemaCheck(schema)
        return check
