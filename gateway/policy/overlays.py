"""Argument limits a rule lays over a tool's inputSchema, shown to the caller and enforced. Pure.

An overlay maps argument names to JSON Schemas. The caller is listed the tool's schema with
each overlaid property tightened (`tighten`); a call is checked against the overlay alone
(`enforced`) before it goes anywhere, whether or not the gateway validates the tool's own schema:
a backend schema that cannot be evaluated must not switch the policy's limits off.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")


def enforced(overlay: Mapping[str, Any]) -> dict[str, Any]:
    """The schema a call's arguments must meet: each overlaid argument, where given, meets its schema."""
    return {"type": "object", "properties": copy.deepcopy(dict(overlay))}


def tighten(schema: Any, overlay: Mapping[str, Any]) -> dict[str, Any]:
    """The tool's inputSchema as this caller sees it: every overlaid property narrowed by the overlay."""
    tightened = copy.deepcopy(schema) if isinstance(schema, dict) else {"type": "object"}
    properties = tightened.get("properties")
    if not isinstance(properties, dict):
        properties = tightened["properties"] = {}
    for name, limits in overlay.items():
        own = properties.get(name)
        properties[name] = _narrowed(own, limits) if isinstance(own, dict) else copy.deepcopy(limits)
    return tightened


def _narrowed(own: dict[str, Any], limits: Mapping[str, Any]) -> dict[str, Any]:
    """A property schema meeting both `own` and `limits`: the tighter bound where both set one,
    the common values of two enums, and `allOf` for any other keyword both set differently."""
    merged = dict(own)
    kept: dict[str, Any] = {}
    for key, value in limits.items():
        if key not in merged or merged[key] == value:
            merged[key] = copy.deepcopy(value)
        elif key in LOWER and _numbers(merged[key], value):
            merged[key] = max(merged[key], value)
        elif key in UPPER and _numbers(merged[key], value):
            merged[key] = min(merged[key], value)
        elif key == "enum" and isinstance(value, list) and isinstance(merged[key], list):
            merged[key] = [v for v in value if v in merged[key]]
        else:
            kept[key] = merged[key]
            merged[key] = copy.deepcopy(value)
    if kept:
        merged["allOf"] = [*merged.get("allOf", []), kept] if isinstance(merged.get("allOf"), list) else [kept]
    return merged


def _numbers(a: Any, b: Any) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
