"""`mcp-gateway policy explain --server NAME`: what the rules give one caller through a virtual server.

With a tool: the server's tool is explained as its source is (catalogue.explain.explain_tool: the rule
that decided, what a call meets), named as the server names it, with the inputSchema the server lists
(fixed arguments hidden) and the call's arguments completed with the fixed ones. With `--list`: each
item of the server, its source and state (serving, pending, withdrawn and why), and whether the caller
is listed it, by which rule; for resources and templates, the gateway URIs each item gives the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.catalogue.explain import explain_list, explain_tool
from gateway.catalogue.listings import PROMPTS, RESOURCES, TEMPLATES
from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.servers import ItemState, item_states, listed_tool_json
from gateway.config import TenantConfig
from gateway.config.server_model import VirtualServer
from gateway.policy import Principal

JsonObject = dict[str, Any]
HIDDEN = {"allowed": False, "reason": "not in the tenant's view (its backends and globs)"}


def explain_served(catalogue: CatalogueService, tenant: TenantConfig, principal: Principal, server: VirtualServer,
                   tool: str | None = None, arguments: Mapping[str, Any] | None = None) -> JsonObject:
    """One tool of `server` for this caller (`tool`), or every item of it."""
    if not server.admits(tenant.name):
        return {"server": server.name, "admitted": False, "note": f"tenant {tenant.name} may not use this server"}
    if tool is not None:
        return _tool(catalogue, tenant, principal, server, tool, arguments)
    return _items(catalogue, tenant, principal, server)


def _tool(catalogue: CatalogueService, tenant: TenantConfig, principal: Principal, server: VirtualServer,
          name: str, arguments: Mapping[str, Any] | None) -> JsonObject:
    item = next((t for t in server.tools if t.name == name), None)
    state = item_states(server, catalogue.current).get(("tools", name))
    source = _sources(catalogue)["tools"].get((item.backend, item.tool)) if item is not None else None
    if item is None or source is None or state is not None:
        why = "the server has no such tool" if item is None else _state(state)
        return {"server": server.name, "tool": name, "exists": False, "note": why}
    given = sorted(set(item.fixed) & set(arguments or {}))
    called = None if arguments is None or given else {**arguments, **item.fixed}
    out = {**explain_tool(catalogue, tenant, principal, source, called), "server": server.name, "tool": name,
           "source": source, "fixed": sorted(item.fixed)}
    if "inputSchema" in out:
        view = catalogue.view(tenant, principal)
        entry = next(e for e in view.entries if e.exposed == source)
        out["inputSchema"] = orjson.loads(listed_tool_json(item, view.tool_json(entry))).get("inputSchema")
    if given:
        out["call"] = {"allowed": False, "reason": "fixed", "message": f"{given[0]!r} is set by this server"}
    return out


def _items(catalogue: CatalogueService, tenant: TenantConfig, principal: Principal,
           server: VirtualServer) -> JsonObject:
    states = item_states(server, catalogue.current)
    decided = explain_list(catalogue, tenant, principal)
    sources = _sources(catalogue)
    out: JsonObject = {"server": server.name, "tenant": tenant.name, "subject": principal.subject,
                       "policy_class": decided["policy_class"]}
    for kind, items in (("tools", server.tools), ("prompts", server.prompts)):
        rows = {row["name"]: row for row in decided[kind]}
        out[kind] = []
        for item in items:
            source = sources[kind].get((item.backend, getattr(item, kind[:-1])))
            state = states.get((kind, item.name))
            decision = {k: v for k, v in rows.get(source, HIDDEN).items() if k != "name"}
            out[kind].append({"name": item.name, "source": source, "state": _state(state),
                              **({"listed": decision} if state is None else {})})
    view = catalogue.view(tenant, principal)
    for kind, items in ((RESOURCES, server.resources), (TEMPLATES, server.templates)):
        entries = view.listing(kind).entries
        out[kind.name] = [{"item": item.name, "state": _state(states.get((kind.name, item.name))),
                           "listed": [e.exposed for e in entries if item.covers(e.backend, e.original)]}
                          for item in items]
    return out


def _sources(catalogue: CatalogueService) -> dict[str, dict[tuple[str, str], str]]:
    """(backend, own name or URI) → exposed name or gateway URI, per kind, in the current catalogue."""
    current = catalogue.current
    out = {"tools": {(e.backend, e.original): e.exposed for e in current.entries}}
    for kind in (PROMPTS, RESOURCES, TEMPLATES):
        listing = current.listings.get(kind.name)
        out[kind.name] = {(e.backend, e.original): e.exposed for e in listing.entries} if listing else {}
    return out


def _state(state: ItemState | None) -> str:
    if state is None:
        return "serving"
    return f"{'withdrawn' if state.withdrawn else 'pending'}: {state.detail}"
