"""Search mode (`discovery: search`): the gateway's own two tools, and what tools/list gives instead of
the catalogue. Pure data and pure functions.

A model in front of a thousand tools pays for every definition in every request, and some APIs take
no more than 128 tools. In search mode tools/list gives `find_tools` and `call_tool` (and the tools
the operator marks `always_listed`); the model searches, then calls what it found, through
`call_tool` or directly by the tool's name. Every tool of the view stays callable.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import Any

import orjson

from gateway.catalogue.merge import ToolEntry

FIND_TOOLS = "find_tools"
CALL_TOOL = "call_tool"
GATEWAY_TOOLS = (FIND_TOOLS, CALL_TOOL)
MAX_QUERY_CHARS = 500
MAX_NAME_CHARS = 200

TOOL_FIELDS = ("name", "title", "description", "inputSchema")
"""What find_tools gives of each tool found: enough to call it."""


def find_tools_tool(results: int, max_results: int) -> dict[str, Any]:
    found = {"type": "object", "properties": {field: {} for field in TOOL_FIELDS}, "required": ["name"]}
    return {
        "name": FIND_TOOLS,
        "title": "Find tools",
        "description": (
            "Search the tools this server can call for you; only a few are listed up front. Describe the task in "
            "plain words (for example 'create a Jira issue' or 'list files in a folder'); you get the best "
            "matching tools, best first, each with its name, description and input schema. Then call the one "
            f"that fits with {CALL_TOOL} (or by its name). If none fits, search again with other words."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
                          "description": "What you want to do, in a few words."},
                "limit": {"type": "integer", "minimum": 1, "maximum": max_results,
                          "description": f"How many tools to return (default {results})."},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"tools": {"type": "array", "items": found}, "truncated": {"type": "boolean"}},
            "required": ["tools"],
        },
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    }


CALL_TOOL_TOOL: dict[str, Any] = {
    "name": CALL_TOOL,
    "title": "Call a tool",
    "description": (
        f"Call a tool found with {FIND_TOOLS}: give its exact name and its arguments as an object that "
        "follows that tool's input schema. You get that tool's own result."),
    "inputSchema": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS,
                     "description": f"The tool's name, as {FIND_TOOLS} gave it."},
            "arguments": {"type": "object", "description": "The tool's arguments."},
        },
        "required": ["name"],
        "additionalProperties": False,
    },
}


def listed_items(kept: Sequence[bytes], results: int, max_results: int) -> list[bytes]:
    """The JSON of each tool tools/list gives in search mode: the gateway's two, then the always-listed."""
    return [orjson.dumps(find_tools_tool(results, max_results)), orjson.dumps(CALL_TOOL_TOOL), *kept]


def always(entry: ToolEntry, always_listed: Sequence[str]) -> bool:
    """Whether a tool is listed in search mode too (never one named like a gateway tool: that name is ours)."""
    return entry.exposed not in GATEWAY_TOOLS and any(fnmatchcase(entry.exposed, g) for g in always_listed)


def found_tool(tool_json: bytes) -> dict[str, Any]:
    """A tool as find_tools gives it: the fields a model needs to call it."""
    tool = orjson.loads(tool_json)
    return {field: tool[field] for field in TOOL_FIELDS if field in tool}
