"""What a virtual server's requests do differently (`/servers/<name>/mcp`, or `stdio --server`).

Its tools and prompts are the server's (catalogue.servers): a call names the server's item, goes
to the source item's backend by the backend's own name, with the server's fixed arguments added,
and passes every check a call on `/mcp` passes (the caller's rules, overlays, schema validation),
so a server reaches nothing its caller could not reach on the gateway's own endpoint.

A client that sends a fixed argument itself is refused (a tool error result, as for arguments its
schema does not accept; for a prompt, -32602): the listed item has no such argument, and overriding
silently would hide a client's mistake.

Its resources and templates are the server's too (catalogue.served_resources): a URI outside them is
not found, as one nobody serves; resources methods and completion are answered only by a server that
has items they apply to, and its capabilities say what it has (`capabilities`).
"""

from __future__ import annotations

from typing import Any

from gateway.catalogue.listings import SUBSCRIBE, ListedEntry
from gateway.catalogue.merge import Catalogue, ToolEntry
from gateway.catalogue.servers import served
from gateway.config.server_model import VirtualServer
from gateway.protocol import spec
from gateway.protocol.errors import InvalidParams

RESOURCE_METHODS = frozenset({spec.RESOURCES_LIST, spec.RESOURCES_TEMPLATES_LIST, spec.RESOURCES_READ,
                              spec.RESOURCES_SUBSCRIBE, spec.RESOURCES_UNSUBSCRIBE})
SERVER_METHODS = frozenset({spec.INITIALIZE, spec.PING, spec.TOOLS_LIST, spec.TOOLS_CALL, spec.PROMPTS_LIST,
                            spec.PROMPTS_GET, spec.SUBSCRIPTIONS_LISTEN, spec.COMPLETION_COMPLETE,
                            *RESOURCE_METHODS})
"""What a virtual server may answer (2026 clients: its `server/discover` too); any other method is unknown,
and so are the resources methods on a server without resources (`answers`)."""


def answers(server: VirtualServer, method: str) -> bool:
    """Whether `server` answers `method` (one of SERVER_METHODS): resources and completion only when it has
    items they apply to."""
    if method in RESOURCE_METHODS:
        return offers(server, "resources")
    if method == spec.COMPLETION_COMPLETE:
        return bool(server.prompts or server.templates)
    return True


def served_call(view: Any, server: VirtualServer, name: Any,
                arguments: dict[str, Any]) -> tuple[ToolEntry, dict[str, Any]] | str:
    """The source tool a server's tool call goes to and its arguments with the fixed ones, or why the
    arguments are refused. Raises InvalidParams (`Unknown tool`) for a name the server does not list."""
    found = served(view, server).lookup(name)
    given = next((key for key in found.item.fixed if key in arguments), None)
    if given is not None:
        return f"Invalid arguments for tool {found.item.name}: {given!r} is set by this server and may not be given"
    return found.entry, {**arguments, **found.item.fixed}


def served_get(view: Any, server: VirtualServer, params: dict[str, Any]) -> tuple[ListedEntry, dict[str, Any]]:
    """The source prompt a server's prompts/get goes to and its params with the fixed arguments. Raises
    InvalidParams for a name the server does not list, or an argument the server fixes."""
    item, entry = served(view, server).prompt(params.get("name"))
    if not item.fixed:
        return entry, params
    arguments = params.get("arguments")
    arguments = arguments if isinstance(arguments, dict) else {}
    given = next((key for key in item.fixed if key in arguments), None)
    if given is not None:
        raise InvalidParams(f"Invalid arguments for prompt {item.name}: {given!r} is set by this server "
                            "and may not be given")
    return entry, {**params, "arguments": {**arguments, **item.fixed}}


def offers(server: VirtualServer, capability: str) -> bool:
    """Whether `server` has items of a list kind: tools always (its list may be empty), prompts and
    resources when it names some."""
    if capability == "prompts":
        return bool(server.prompts)
    if capability == "resources":
        return bool(server.resources or server.templates)
    return capability == "tools"


def capabilities(server: VirtualServer, list_changed: bool, catalogue: Catalogue) -> dict[str, Any]:
    """What a virtual server offers: tools; prompts and resources when it names some; resource subscriptions
    and completions when a backend its items come from serves them."""
    changed = {"listChanged": list_changed}
    offered: dict[str, Any] = {"tools": changed}
    if offers(server, "prompts"):
        offered["prompts"] = changed
    if offers(server, "resources"):
        sources = {item.backend for item in (*server.resources, *server.templates)}
        subscribe = list_changed and any(catalogue.offers(b, SUBSCRIBE) for b in sources)
        offered["resources"] = {"subscribe": True, **changed} if subscribe else changed
    completing = {item.backend for item in (*server.prompts, *server.templates)}
    if any(catalogue.offers(backend, "completions") for backend in completing):
        offered["completions"] = {}
    return offered


def instructions(server: VirtualServer, default: str) -> str:
    return server.instructions if server.instructions is not None else default
