"""What a virtual server's requests do differently (`/servers/<name>/mcp`, or `stdio --server`).

Its tools and prompts are the server's (catalogue.servers): a call names the server's item, goes
to the source item's backend by the backend's own name, with the server's fixed arguments added,
and passes every check a call on `/mcp` passes (the caller's rules, overlays, schema validation),
so a server reaches nothing its caller could not reach on the gateway's own endpoint.

A client that sends a fixed argument itself is refused (a tool error result, as for arguments its
schema does not accept): the listed schema has no such argument, and overriding silently would
hide a client's mistake.
"""

from __future__ import annotations

from typing import Any

from gateway.catalogue.merge import ToolEntry
from gateway.catalogue.servers import served
from gateway.config.server_model import VirtualServer
from gateway.protocol import spec

SERVER_METHODS = frozenset({spec.INITIALIZE, spec.PING, spec.TOOLS_LIST, spec.TOOLS_CALL, spec.PROMPTS_LIST,
                            spec.PROMPTS_GET, spec.SUBSCRIPTIONS_LISTEN})
"""What a virtual server answers (2026 clients: its `server/discover` too); any other method is unknown."""


def served_call(view: Any, server: VirtualServer, name: Any,
                arguments: dict[str, Any]) -> tuple[ToolEntry, dict[str, Any]] | str:
    """The source tool a server's tool call goes to and its arguments with the fixed ones, or why the
    arguments are refused. Raises InvalidParams (`Unknown tool`) for a name the server does not list."""
    found = served(view, server).lookup(name)
    given = next((key for key in found.item.fixed if key in arguments), None)
    if given is not None:
        return f"Invalid arguments for tool {found.item.name}: {given!r} is set by this server and may not be given"
    return found.entry, {**arguments, **found.item.fixed}


def capabilities(server: VirtualServer, list_changed: bool) -> dict[str, Any]:
    """What a virtual server offers: tools, and prompts when it names some."""
    changed = {"listChanged": list_changed}
    offered: dict[str, Any] = {"tools": changed}
    if server.prompts:
        offered["prompts"] = changed
    return offered


def instructions(server: VirtualServer, default: str) -> str:
    return server.instructions if server.instructions is not None else default
