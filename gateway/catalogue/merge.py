"""Merge backend snapshots into one catalogue, built off to the side and swapped whole. Pure."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.catalogue.namespace import exposed_name

JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class BackendSnapshot:
    """What one backend offered at `fetched_at`; `status` is ok, stale or down."""

    backend: str
    tools: tuple[JsonObject, ...]
    version: str
    fetched_at: float
    status: str = "ok"
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ToolEntry:
    exposed: str
    backend: str
    original: str
    tool: JsonObject  # the backend's tool with only `name` replaced


@dataclass(frozen=True, slots=True)
class Collision:
    exposed: str
    winner: str  # backend
    loser: str  # backend


@dataclass(frozen=True, slots=True)
class Catalogue:
    version: str
    entries: tuple[ToolEntry, ...]
    by_name: Mapping[str, ToolEntry]
    collisions: tuple[Collision, ...] = ()
    renamed: tuple[tuple[str, str, str], ...] = ()  # (backend, original, exposed)
    hidden: tuple[tuple[str, str], ...] = ()  # (backend, original): needs tasks
    snapshots: Mapping[str, BackendSnapshot] = field(default_factory=dict)


def snapshot_version(tools: Sequence[JsonObject]) -> str:
    """A stable hash of a tool list, so unchanged lists keep their version."""
    return hashlib.sha256(orjson.dumps(list(tools), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def merge(
    order: Sequence[tuple[str, str]],
    snapshots: Mapping[str, BackendSnapshot],
    separator: str,
) -> Catalogue:
    """Build the catalogue from `(backend, namespace)` pairs in config order.

    The backend listed first wins a name collision; the loser's tool is left out and reported.
    """
    entries: dict[str, ToolEntry] = {}
    collisions: list[Collision] = []
    renamed: list[tuple[str, str, str]] = []
    hidden: list[tuple[str, str]] = []
    for backend, namespace in order:
        snapshot = snapshots.get(backend)
        for tool in snapshot.tools if snapshot else ():
            original = tool["name"]
            if _needs_tasks(tool):
                hidden.append((backend, original))
                continue
            name = exposed_name(namespace, separator, original)
            if name in entries:
                collisions.append(Collision(name, entries[name].backend, backend))
                continue
            if name != (f"{namespace}{separator}{original}" if namespace else original):
                renamed.append((backend, original, name))
            entries[name] = ToolEntry(name, backend, original, {**tool, "name": name})
    version = _catalogue_version(order, snapshots)
    return Catalogue(version, tuple(entries.values()), entries, tuple(collisions),
                     tuple(renamed), tuple(hidden), dict(snapshots))


def _needs_tasks(tool: JsonObject) -> bool:
    execution = tool.get("execution")
    return isinstance(execution, dict) and execution.get("taskSupport") == "required"


def _catalogue_version(order: Sequence[tuple[str, str]], snapshots: Mapping[str, BackendSnapshot]) -> str:
    parts = [f"{b}:{ns}:{snapshots[b].version if b in snapshots else '-'}" for b, ns in order]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
