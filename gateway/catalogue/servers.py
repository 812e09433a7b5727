"""Virtual servers in the catalogue: which of a server's items stand, and what one caller is listed.

An item of a server names its source by backend and the backend's own name, so it is found again
in every catalogue version whatever the exposed names became. It stands when its source is in the
catalogue and every fixed argument is still one the source takes (a tool's inputSchema accepts it, a
prompt lists the argument); else it is withdrawn (`item_states`), which is the same for every caller:
not listed, and called like an unknown tool. A backend not listed yet leaves its items pending (not
listed, not withdrawn).

What a caller is listed (`ServerView`) is then the standing items whose source the caller's own
view has, so the tenant's globs and rules still decide each source: a caller never reaches through
a server what it could not reach on `/mcp`. Built once per server and view, pages pre-encoded.
Resources and templates: catalogue.served_resources.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from jsonschema import validators

from gateway.catalogue.listings import PROMPTS, ListedEntry
from gateway.catalogue.listviews import Route
from gateway.catalogue.merge import Catalogue, ToolEntry
from gateway.catalogue.pages import encode_pages, page_at
from gateway.catalogue.served_resources import ServedResources, absent_sources
from gateway.config.server_model import ServedPrompt, ServedResource, ServedTemplate, ServedTool, VirtualServer
from gateway.protocol import spec
from gateway.protocol.errors import InvalidParams

MISSING, ARGUMENT_GONE, ARGUMENT_INVALID, PENDING = "missing", "argument_gone", "argument_invalid", "pending"
WITHDRAWN_REASONS = (MISSING, ARGUMENT_GONE, ARGUMENT_INVALID)
"""Why an item is withdrawn (a metrics label): its source is gone, or a fixed argument no longer fits."""


@dataclass(frozen=True, slots=True)
class ItemState:
    """An item of a server that is not served to anyone, and why."""

    kind: str  # tools | prompts | resources | templates
    name: str
    reason: str  # one of WITHDRAWN_REASONS, or PENDING
    detail: str

    @property
    def withdrawn(self) -> bool:
        return self.reason != PENDING


def item_states(server: VirtualServer, catalogue: Catalogue) -> dict[tuple[str, str], ItemState]:
    """(kind, name) → state for each item of `server` that does not stand in `catalogue`."""
    out: dict[tuple[str, str], ItemState] = {}
    if server.tools:
        tools = {(e.backend, e.original): e for e in catalogue.entries}
        for tool in server.tools:
            state = _tool_state(tool, tools.get((tool.backend, tool.tool)), catalogue)
            if state is not None:
                out[("tools", tool.name)] = state
    if server.prompts:
        listing = catalogue.listings.get(PROMPTS.name)
        prompts = {(e.backend, e.original): e for e in listing.entries} if listing else {}
        for prompt in server.prompts:
            state = _prompt_state(prompt, prompts.get((prompt.backend, prompt.prompt)), catalogue)
            if state is not None:
                out[("prompts", prompt.name)] = state
    for kind, item in absent_sources(server, catalogue):
        out[(kind, item.name)] = _absent(kind, item, catalogue)
    return out


def _prompt_state(prompt: ServedPrompt, entry: ListedEntry | None, catalogue: Catalogue) -> ItemState | None:
    if entry is None:
        return _absent("prompts", prompt, catalogue)
    arguments = entry.item.decoded(PROMPTS).get("arguments") if prompt.fixed else None
    names = {a.get("name") for a in arguments if isinstance(a, dict)} if isinstance(arguments, list) else set()
    gone = next((argument for argument in prompt.fixed if argument not in names), None)
    if gone is None:
        return None
    return ItemState("prompts", prompt.name, ARGUMENT_GONE,
                     f"{prompt.backend} prompt {prompt.prompt!r} has no argument {gone!r} any more")


def _tool_state(tool: ServedTool, entry: ToolEntry | None, catalogue: Catalogue) -> ItemState | None:
    if entry is None:
        return _absent("tools", tool, catalogue)
    if not tool.fixed:
        return None
    schema = entry.decoded().get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    for argument, value in tool.fixed.items():
        if not isinstance(properties, dict) or argument not in properties:
            return ItemState("tools", tool.name, ARGUMENT_GONE,
                             f"{tool.backend} tool {tool.tool!r} has no argument {argument!r} any more")
        if isinstance(properties[argument], dict) and not _fits(properties[argument], value):
            return ItemState("tools", tool.name, ARGUMENT_INVALID,
                             f"{tool.backend} tool {tool.tool!r} no longer accepts the fixed value of {argument!r}")
    return None


def _absent(kind: str, item: ServedTool | ServedPrompt | ServedResource | ServedTemplate,
            catalogue: Catalogue) -> ItemState:
    own = item.tool if isinstance(item, ServedTool) else item.prompt if isinstance(item, ServedPrompt) else item.source
    if catalogue.unknown(item.backend):
        return ItemState(kind, item.name, PENDING, f"backend {item.backend!r} has not been listed yet")
    return ItemState(kind, item.name, MISSING, f"{item.backend} no longer lists {kind[:-1]} {own!r}")


def _fits(schema: dict[str, Any], value: Any) -> bool:
    try:
        validator = validators.validator_for(schema)(schema)
        return bool(validator.is_valid(value))
    except Exception:  # a schema the validator cannot use: the backend is the judge
        return True


@dataclass(frozen=True, slots=True)
class ServedEntry:
    """A tool a server lists to a caller: its config item and its source in the caller's view."""

    item: ServedTool
    entry: ToolEntry


class ServerView:
    """What one caller class is listed by one server in one catalogue version (and may call)."""

    def __init__(self, server: VirtualServer, view: Any, *, page_size: int) -> None:
        """`view`: the caller's catalogue.views.TenantView (its tools as it sees them, its prompts)."""
        self.server = server
        states = item_states(server, view.catalogue)
        own = {(e.backend, e.original): e for e in view.entries}
        tools = []
        for item in server.tools:
            entry = own.get((item.backend, item.tool))
            if entry is not None and ("tools", item.name) not in states:
                tools.append((ServedEntry(item, entry), listed_tool_json(item, view.tool_json(entry))))
        self.by_name: Mapping[str, ServedEntry] = {served.item.name: served for served, _ in tools}
        self.id = hashlib.sha256(f"{server.name}\0{view.id}".encode()).hexdigest()[:16]
        self.page_size = page_size
        self.pages = encode_pages(self.id, [raw for _, raw in tools], "tools", page_size)
        prompts = view.listing(PROMPTS).by_key
        sources = {(e.backend, e.original): e for e in prompts.values()}
        self.prompts: dict[str, tuple[ServedPrompt, ListedEntry]] = {
            p.name: (p, sources[(p.backend, p.prompt)]) for p in server.prompts
            if (p.backend, p.prompt) in sources and ("prompts", p.name) not in states}
        self.prompt_pages = encode_pages(f"{self.id}p", [_prompt_json(p, e) for p, e in self.prompts.values()],
                                         "prompts", page_size)
        self.resources = ServedResources(server, view, states, self.id)

    def page(self, cursor: Any) -> orjson.Fragment:
        return page_at(self.pages, self.id, self.page_size, cursor)

    def prompt_page(self, cursor: Any) -> orjson.Fragment:
        return page_at(self.prompt_pages, f"{self.id}p", self.page_size, cursor)

    def lookup(self, name: Any) -> ServedEntry:
        """The tool listed as `name`; unknown, withdrawn and invisible names look the same."""
        served = self.by_name.get(name) if isinstance(name, str) else None
        if served is None:
            raise InvalidParams(f"Unknown tool: {str(name)[:200]}")
        return served

    def prompt(self, name: Any) -> tuple[ServedPrompt, ListedEntry]:
        found = self.prompts.get(name) if isinstance(name, str) else None
        if found is None:
            raise InvalidParams(f"Unknown prompt: {str(name)[:200]}")
        return found


def listed_tool_json(item: ServedTool, source: bytes) -> bytes:
    """The source tool as the server lists it: renamed, retitled, redescribed, fixed arguments hidden."""
    tool = orjson.loads(source)
    tool["name"] = item.name
    if item.title is not None:
        tool["title"] = item.title
    if item.description is not None:
        tool["description"] = item.description
    schema = tool.get("inputSchema")
    if item.fixed and isinstance(schema, dict):
        schema = tool["inputSchema"] = dict(schema)
        if isinstance(schema.get("properties"), dict):
            schema["properties"] = {k: v for k, v in schema["properties"].items() if k not in item.fixed}
        if isinstance(schema.get("required"), list):
            schema["required"] = [k for k in schema["required"] if k not in item.fixed]
    return orjson.dumps(tool)


def _prompt_json(item: ServedPrompt, entry: ListedEntry) -> bytes:
    """The source prompt as the server lists it: renamed, retitled, redescribed, fixed arguments hidden."""
    prompt = orjson.loads(entry.json(PROMPTS))
    prompt["name"] = item.name
    if item.fixed and isinstance(prompt.get("arguments"), list):
        prompt["arguments"] = [a for a in prompt["arguments"]
                               if not isinstance(a, dict) or a.get("name") not in item.fixed]
    if item.title is not None:
        prompt["title"] = item.title
    if item.description is not None:
        prompt["description"] = item.description
    return orjson.dumps(prompt)


def served_route(view: Any, server: VirtualServer, uri: Any) -> Route | None:
    """Where a URI read through `server` goes: the caller's own route (view.resolve_uri), if the server takes it."""
    route = view.resolve_uri(uri)
    return route if route is not None and served(view, server).resources.reads(uri, route) else None


def served(view: Any, server: VirtualServer) -> ServerView:
    """`server`'s view for the caller of `view` (a TenantView), built once per server config and view."""
    found: ServerView | None = view.served.get(server.name)
    if found is None or found.server is not server:
        found = view.served[server.name] = ServerView(server, view, page_size=view.page_size)
    return found


def server_changes(old: Mapping[str, VirtualServer], new: Mapping[str, VirtualServer],
                   tenants: Iterable[str]) -> dict[str, set[str]]:
    """For a reload: each list_changed method, and the tenants whose clients are to hear it because a
    server they may use was added, removed or changed its tools (prompts, resources, templates). Clients are told by
    tenant, so a client of that tenant on another endpoint may hear of a change it does not see: it
    lists again and finds the same (the transports do not know which endpoint a client is on)."""
    every = set(tenants)
    out: dict[str, set[str]] = {}
    for name in old.keys() | new.keys():
        before, after = old.get(name), new.get(name)
        if before == after:
            continue
        admitted = set().union(*(every if "*" in s.tenants else set(s.tenants) for s in (before, after) if s))
        for kind, method in (("tools", spec.TOOLS_LIST_CHANGED), ("prompts", spec.PROMPTS_LIST_CHANGED),
                             ("resources", spec.RESOURCES_LIST_CHANGED), ("templates", spec.RESOURCES_LIST_CHANGED)):
            if getattr(before, kind, ()) != getattr(after, kind, ()):
                out.setdefault(method, set()).update(admitted & every)
    return out
