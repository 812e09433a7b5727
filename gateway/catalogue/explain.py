"""`mcp-gateway policy explain` and `GET /admin/policy/explain`: what the rules give one caller.

For a tool: whether it is listed, the rule that decided, the inputSchema the caller is shown and,
with arguments, what a call with them would meet. For `--list`: every item of the tenant (its
globs applied) with whether the caller is listed it, and by which rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.catalogue.listings import KINDS
from gateway.catalogue.refresher import CatalogueService
from gateway.config import TenantConfig
from gateway.policy import Decision, Item, Principal
from gateway.protocol import spec

JsonObject = dict[str, Any]


def _decision(decision: Decision) -> JsonObject:
    out: JsonObject = {"allowed": decision.allowed, "rule": decision.rule_name}
    if decision.conditional:
        out["decided_per_call"] = True  # a rule reads the request: the call decides again
    if not decision.allowed:
        out["reason"] = decision.reason
    return out


def explain_list(catalogue: CatalogueService, tenant: TenantConfig, principal: Principal) -> JsonObject:
    """Every item the tenant's globs let through, each with the caller's decision."""
    plain = catalogue.view(tenant)
    access = tenant.policy.access(principal)
    out: JsonObject = {"tenant": tenant.name, "subject": principal.subject, "policy_class": _class_name(access.key),
                       "tools": [{"name": e.exposed, **_decision(access.decide(Item("tools", e.exposed, e.backend)))}
                                 for e in plain.entries]}
    for kind in KINDS:
        out[kind.name] = [{"name": e.exposed, **_decision(access.decide(Item(kind.name, e.exposed, e.backend)))}
                          for e in plain.listing(kind).entries]
    return out


def explain_tool(catalogue: CatalogueService, tenant: TenantConfig, principal: Principal, name: str,
                 arguments: Mapping[str, Any] | None = None) -> JsonObject:
    """One tool: listed or not and why, the schema shown, and what a call with `arguments` meets."""
    entry = catalogue.view(tenant).by_name.get(name)
    if entry is None:
        return {"tool": name, "exists": False, "note": "no such tool in this tenant's catalogue (or its globs hide it)"}
    item = Item("tools", entry.exposed, entry.backend)
    listed = tenant.policy.decide(principal, item)
    out: JsonObject = {"tool": name, "exists": True, "listed": _decision(listed)}
    view = catalogue.view(tenant, principal)
    if listed.allowed:
        shown = next(view.tool_json(e) for e in view.entries if e.exposed == name)
        out["inputSchema"] = orjson.loads(shown).get("inputSchema")
    if arguments is not None:
        call = tenant.policy.decide(principal, item, arguments, method=spec.TOOLS_CALL)
        out["call"] = _decision(call)
        refusal = view.tool_refusal(entry, arguments, principal) if listed.allowed else None
        if refusal is not None:
            out["call"] = {**_decision(refusal.decision), "allowed": False, "reason": refusal.reason,
                           "message": refusal.message}
        elif not call.allowed:
            out["call"]["message"] = call.refusal()
    return out


def _class_name(key: tuple[tuple[int, bool], ...]) -> str:
    """The policy class as the rules that apply (`3`, or `5?` for a rule decided per call)."""
    return ",".join(f"{index}{'?' if pending else ''}" for index, pending in key) or "none"
