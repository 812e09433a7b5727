"""Which items of a backend snapshot clients are served, held back or served cleaned. Pure.

`screen` compares each item's fingerprint with the approved ones: in `hold` mode a changed item
(and, with `new_items: hold`, a new one) is held; in every mode but `off`-with-`allow` hidden
Unicode is removed or the item held (`invisible`). The result is a snapshot of its own, whose
version tells the screening apart, so the merge, the views and `list_changed` follow approvals
like any other change of the catalogue.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gateway.catalogue.fingerprints import ItemKey, definitions, fingerprint
from gateway.catalogue.invisible import cleaned, hidden_in
from gateway.catalogue.listings import BY_NAME, Listed
from gateway.catalogue.merge import BackendSnapshot, Tool
from gateway.config.integrity import BackendIntegrity

HELD_CHANGED, HELD_NEW, HELD_INVISIBLE = "changed", "new", "invisible"
"""Why an item is held: its definition differs from the approved one, it was never approved, it hides characters."""


@dataclass(frozen=True, slots=True)
class Held:
    backend: str
    key: ItemKey
    reason: str  # HELD_CHANGED | HELD_NEW | HELD_INVISIBLE
    fingerprint: str
    hidden: tuple[str, ...] = ()  # the code points, for HELD_INVISIBLE


@dataclass(frozen=True, slots=True)
class Reading:
    """A snapshot's items fingerprinted once (per snapshot version, not per screening). The decoded
    definitions are not kept: they take several times the memory of the compact JSON the catalogue holds."""

    prints: Mapping[ItemKey, str]
    hidden: Mapping[ItemKey, tuple[str, ...]]  # items whose titles or descriptions hide code points

    @classmethod
    def of(cls, snapshot: BackendSnapshot, found: Mapping[ItemKey, Any] | None = None) -> Reading:
        found = definitions(snapshot) if found is None else found
        hidden = {key: tuple(points) for key, item in found.items() if (points := hidden_in(item))}
        return cls({key: fingerprint(item) for key, item in found.items()}, hidden)


@dataclass(frozen=True, slots=True)
class Screened:
    snapshot: BackendSnapshot  # what clients are served
    held: tuple[Held, ...] = ()
    held_tools: tuple[Tool, ...] = ()  # the held tools' new definitions (a call to one names the hold)
    cleaned: Mapping[ItemKey, tuple[str, ...]] = field(default_factory=dict)  # served with these removed


def screen(snapshot: BackendSnapshot, rules: BackendIntegrity, reading: Reading,
           approved: Mapping[ItemKey, frozenset[str]] | None) -> Screened:
    """`approved`: each item's approved fingerprints; None while the backend has no approvals at all."""
    held = {key: _held(snapshot.backend, key, rules, reading, approved) for key in reading.prints}
    held = {key: reason for key, reason in held.items() if reason is not None}
    clean = {key: points for key, points in reading.hidden.items()
             if rules.invisible == "clean" and key not in held}
    if not held and not clean:
        return Screened(snapshot)
    tools, held_tools = _tools(snapshot, held, clean)
    lists = {name: tuple(_listed(name, item, clean) for item in items if (name, item.key) not in held)
             for name, items in snapshot.lists.items()}
    marks = "|".join([snapshot.version, *sorted(f"h:{k[0]}/{k[1]}" for k in held),
                      *sorted(f"c:{k[0]}/{k[1]}" for k in clean)])
    version = hashlib.sha256(marks.encode()).hexdigest()[:16]
    served = replace(snapshot, tools=tools, lists=lists, version=version)
    return Screened(served, tuple(held.values()), held_tools, clean)


def _held(backend: str, key: ItemKey, rules: BackendIntegrity, reading: Reading,
          approved: Mapping[ItemKey, frozenset[str]] | None) -> Held | None:
    print_ = reading.prints[key]
    if rules.invisible == "hold" and key in reading.hidden:
        return Held(backend, key, HELD_INVISIBLE, print_, reading.hidden[key])
    if not rules.holds or approved is None:
        return None
    if key in approved:
        return None if print_ in approved[key] else Held(backend, key, HELD_CHANGED, print_)
    return Held(backend, key, HELD_NEW, print_) if rules.new_items == "hold" else None


def _tools(snapshot: BackendSnapshot, held: Mapping[ItemKey, Held],
           clean: Mapping[ItemKey, tuple[str, ...]]) -> tuple[tuple[Tool, ...], tuple[Tool, ...]]:
    served, kept_back = [], []
    for tool in snapshot.tools:
        key = ("tools", tool.name)
        if key in held:
            kept_back.append(tool)
        elif key in clean:
            served.append(replace(Tool.from_dict(cleaned(tool.decoded())), needs=tool.needs))
        else:
            served.append(tool)
    return tuple(served), tuple(kept_back)


def _listed(name: str, item: Listed, clean: Mapping[ItemKey, tuple[str, ...]]) -> Listed:
    if (name, item.key) not in clean:
        return item
    kind = BY_NAME[name]
    return Listed.from_dict(kind, cleaned(item.decoded(kind))) or item
