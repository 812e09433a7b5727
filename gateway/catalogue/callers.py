"""What a caller's policy class makes of a tenant's view: the items it is listed, the tool schemas
it is shown, and what its calls must still pass.

Everything that does not depend on a call's arguments is worked out here once per class and
catalogue version (views.TenantView). A listed tool needs work at call time only when a rule
reads the request or lays an overlay on its arguments: it then has a `ToolPlan`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.catalogue.arguments import SchemaCheck
from gateway.catalogue.listings import ListedEntry
from gateway.catalogue.merge import ToolEntry
from gateway.policy import Access, Decision, Item, Principal
from gateway.policy.overlays import enforced, tighten
from gateway.protocol import spec


@dataclass(frozen=True, slots=True)
class Refusal:
    """A call the policy refuses: what the caller is told, and why in one word (a metrics label)."""

    message: str
    decision: Decision
    reason: str  # rule | default | condition | arguments


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """What a call of one listed tool must pass: a decision made per call, and/or the listed overlay."""

    item: Item
    listed: Decision
    overlay: SchemaCheck | None


def tool_item(entry: ToolEntry) -> Item:
    return Item("tools", entry.exposed, entry.backend)


def plan_tools(entries: Iterable[ToolEntry], access: Access) -> tuple[list[ToolEntry], dict[str, ToolPlan],
                                                                       dict[str, bytes]]:
    """The tools a class is listed, the plans of those needing call-time work, and the JSON of those
    shown with a tightened schema."""
    listed, plans, shown = [], {}, {}
    for entry in entries:
        item = tool_item(entry)
        decision = access.decide(item)
        if not decision.allowed:
            continue
        listed.append(entry)
        overlay = decision.overlay
        if decision.conditional or overlay is not None:
            plans[entry.exposed] = ToolPlan(item, decision, SchemaCheck(enforced(overlay)) if overlay else None)
        if overlay is not None:
            shown[entry.exposed] = _tightened(entry, overlay)
    return listed, plans, shown


def listed_items(kind: str, entries: Iterable[ListedEntry], access: Access) -> tuple[list[ListedEntry], frozenset[str]]:
    """The prompts, resources or templates a class is listed, and the keys a call must decide again."""
    listed, conditional = [], set()
    for entry in entries:
        decision = access.decide(Item(kind, entry.exposed, entry.backend))
        if decision.allowed:
            listed.append(entry)
            if decision.conditional:
                conditional.add(entry.exposed)
    return listed, frozenset(conditional)


def tool_refusal(plan: ToolPlan, access: Access, principal: Principal | None,
                 arguments: Mapping[str, Any], overlays: dict[int, SchemaCheck]) -> Refusal | None:
    """Why a call of a planned tool is refused, or None: its rules with the request, then its overlay."""
    decision, check = plan.listed, plan.overlay
    if decision.conditional:
        decision = access.decide(plan.item, _request(spec.TOOLS_CALL, plan.item.name, arguments), principal)
        if not decision.allowed:
            return Refusal(decision.refusal(), decision, decision.reason)
        overlay = decision.overlay
        check = None if overlay is None else _compiled(overlays, overlay)
    problem = check.problem(dict(arguments)) if check is not None else None
    if problem:
        return Refusal(f"Invalid arguments for tool {plan.item.name}: {problem}", decision, "arguments")
    return None


def call_refusal(access: Access, item: Item, principal: Principal | None, method: str,
                 arguments: Mapping[str, Any]) -> Refusal | None:
    """Why a call of a listed prompt, resource or template is refused now that its request is known."""
    decision = access.decide(item, _request(method, item.name, arguments), principal)
    return None if decision.allowed else Refusal(decision.refusal(), decision, decision.reason)


def _request(method: str, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {"method": method, "name": name, "arguments": arguments}


def _compiled(overlays: dict[int, SchemaCheck], overlay: Mapping[str, Any]) -> SchemaCheck:
    """One compiled check per overlay (a rule's mapping lives as long as the config)."""
    check = overlays.get(id(overlay))
    if check is None:
        check = overlays[id(overlay)] = SchemaCheck(enforced(overlay))
    return check


def _tightened(entry: ToolEntry, overlay: Mapping[str, Any]) -> bytes:
    tool = entry.decoded()
    tool["inputSchema"] = tighten(tool.get("inputSchema"), overlay)
    return orjson.dumps(tool)
