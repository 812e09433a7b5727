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


@dataclass(frozen=True, slots=True)
class BackendEntries:
    """One backend's tools under their exposed names, before collisions with other backends."""

    key: tuple[str, str, str]  # (namespace, separator, snapshot version)
    entries: tuple[ToolEntry, ...]
    renamed: tuple[tuple[str, str, str], ...]
    hidden: tuple[tuple[str, str], ...]


def backend_entries(backend: str, namespace: str, separator: str, snapshot: BackendSnapshot | None) -> BackendEntries:
    """Name one backend's tools; the result depends only on its key, so callers may reuse it."""
    entries: list[ToolEntry] = []
    renamed: list[tuple[str, str, str]] = []
    hidden: list[tuple[str, str]] = []
    for tool in snapshot.tools if snapshot else ():
        original = tool["name"]
        if _needs_tasks(tool):
            hidden.append((backend, original))
            continue
        name = exposed_name(namespace, separator, original)
        if name != (f"{namespace}{separator}{original}" if namespace else original):
            renamed.append((backend, original, name))
        entries.append(ToolEntry(name, backend, original, {**tool, "name": name}))
    key = (namespace, separator, snapshot.version if snapshot else "-")
    return BackendEntries(key, tuple(entries), tuple(renamed), tuple(hidden))


def merge(
    order: Sequence[tuple[str, str]],
    snapshots: Mapping[str, BackendSnapshot],
    separator: str,
    memo: dict[str, BackendEntries] | None = None,
) -> Catalogue:
    """Build the catalogue from `(backend, namespace)` pairs in config order.

    The backend listed first wins a name collision; the loser's tool is left out and reported.
    With `memo`, a backend whose snapshot version is unchanged keeps its named entries (the same
    objects), so a refresh costs the changed backend only and diffs can compare by identity.
    """
    entries: dict[str, ToolEntry] = {}
    collisions: list[Collision] = []
    renamed: list[tuple[str, str, str]] = []
    hidden: list[tuple[str, str]] = []
    for backend, namespace in order:
        named = _named(backend, namespace, separator, snapshots.get(backend), memo)
        renamed += named.renamed
        hidden += named.hidden
        for entry in named.entries:
            if entry.exposed in entries:
                collisions.append(Collision(entry.exposed, entries[entry.exposed].backend, backend))
            else:
                entries[entry.exposed] = entry
    version = _catalogue_version(order, snapshots)
    return Catalogue(version, tuple(entries.values()), entries, tuple(collisions),
                     tuple(renamed), tuple(hidden), dict(snapshots))


def _named(backend: str, namespace: str, separator: str, snapshot: BackendSnapshot | None,
           memo: dict[str, BackendEntries] | None) -> BackendEntries:
    key = (namespace, separator, snapshot.version if snapshot else "-")
    cached = memo.get(backend) if memo is not None else None
    if cached is not None and cached.key == key:
        return cached
    named = backend_entries(backend, namespace, separator, snapshot)
    if memo is not None:
        memo[backend] = named  # only the latest per backend: the memo stays as small as the config
    return named


def _needs_tasks(tool: JsonObject) -> bool:
    execution = tool.get("execution")
    return isinstance(execution, dict) and execution.get("taskSupport") == "required"


def _catalogue_version(order: Sequence[tuple[str, str]], snapshots: Mapping[str, BackendSnapshot]) -> str:
    parts = [f"{b}:{ns}:{snapshots[b].version if b in snapshots else '-'}" for b, ns in order]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
