"""Merge backend snapshots into one catalogue, built off to the side and swapped whole. Pure."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from gateway.catalogue.listings import KINDS, TASK_CALLS_OFFER, Listed, Listing, merge_listing
from gateway.catalogue.namespace import exposed_name
from gateway.catalogue.uris import rewrite_ui_meta
from gateway.protocol import spec

JsonObject = dict[str, Any]

ERA_TRAITS = frozenset({"era.handshake", "era.2026"})
"""The client traits of the two eras (catalogue.variants): a client has exactly one of them."""
TASK_TRAIT = "tasks"
"""The client trait of a 2025-11-25 session that declared `tasks` (catalogue.variants): tools that require tasks,
of a backend that serves them, are listed to such clients only."""
TASK_SUPPORT_KEY = b'"taskSupport"'
"""A tool whose JSON lacks this key cannot require tasks, so most tools are never decoded at merge."""
HEADER_ANNOTATION = spec.X_MCP_HEADER.encode()
UI_RESOURCE_KEY = b'resourceUri"'
"""In every tool that names an MCP Apps UI resource (`_meta.ui.resourceUri`, or the older `ui/resourceUri`)."""


@dataclass(frozen=True, slots=True)
class Tool:
    """One backend tool, kept as compact JSON and decoded only when a field is needed.

    A decoded tool takes several times the memory of its JSON (bench/FIGURES.md), and a catalogue
    holds thousands of them.
    `tail` is the object after its `name` member, so the renamed copy clients see shares it.
    """

    name: str
    tail: bytes  # b',"description":…}' or b'}'
    header_arguments: bool = False
    """Whether it may name `x-mcp-header` arguments: told once here, not searched for on every 2026 call."""
    needs: frozenset[str] = frozenset()
    """The client traits it is listed to (catalogue.variants): empty for a tool every client sees."""

    @classmethod
    def from_dict(cls, tool: JsonObject) -> Tool:
        """Raises TypeError (orjson's encode error is one) or KeyError for what is not a tool."""
        name = tool["name"]
        if not isinstance(name, str):
            raise TypeError("a tool name is a string")
        rest = orjson.dumps({k: v for k, v in tool.items() if k != "name"})
        # Concatenation allocates the exact size: orjson's own result holds a buffer of several KB.
        tail = b"}" if rest == b"{}" else b"," + memoryview(rest)[1:]
        return cls(name, tail, HEADER_ANNOTATION in tail)

    def json(self, name: str | None = None) -> bytes:
        """The tool object as JSON, under `name` (by default its own)."""
        return b'{"name":' + orjson.dumps(self.name if name is None else name) + self.tail

    def decoded(self, name: str | None = None) -> JsonObject:
        return orjson.loads(self.json(name))


@dataclass(frozen=True, slots=True)
class BackendSnapshot:
    """What one backend offered at `fetched_at`; `status` is ok, stale or down.

    `lists` holds its prompts, resources and templates by kind name; `offers` the capabilities
    it declared of `listings.OFFERED`. `version` covers all of it (`combined_version`), and
    `versions` each kind's own.
    """

    backend: str
    tools: tuple[Tool, ...]
    version: str
    fetched_at: float
    status: str = "ok"
    error: str | None = None
    lists: Mapping[str, tuple[Listed, ...]] = field(default_factory=dict)
    offers: frozenset[str] = frozenset()
    versions: Mapping[str, str] = field(default_factory=dict)  # per kind ("tools" too), to refresh one kind


@dataclass(frozen=True, slots=True)
class ToolEntry:
    exposed: str
    backend: str
    tool: Tool  # the backend's tool; clients see it named `exposed`
    encoded: bytes = field(init=False, repr=False, compare=False)
    """The tool as clients see it, encoded once: every tenant's view lists these very bytes."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "encoded", self.tool.json(self.exposed))  # frozen: set once, here

    @property
    def original(self) -> str:
        return self.tool.name

    def json(self) -> bytes:
        """The tool as clients see it: the backend's, with only `name` replaced."""
        return self.encoded

    def decoded(self) -> JsonObject:
        """Parsed on each call: for the few readers of single fields (validation, the CLI)."""
        return self.tool.decoded(self.exposed)


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
    hidden: tuple[tuple[str, str], ...] = ()  # (backend, original): needs tasks its backend does not serve
    snapshots: Mapping[str, BackendSnapshot] = field(default_factory=dict)
    listings: Mapping[str, Listing] = field(default_factory=dict)  # prompts, resources, templates
    order: tuple[tuple[str, str], ...] = ()  # (backend, namespace) in config order
    header_tools: frozenset[str] = frozenset()  # exposed names of tools with `x-mcp-header` arguments (few, if any)
    gated: bool = False
    """Whether some tool is listed to some clients only (`Tool.needs`): then views depend on the client's traits,
    and `by_name` holds, of a dual-era backend's tool listed differently per era, the first."""
    held: Mapping[str, ToolEntry] = field(default_factory=dict)
    """Tools held for review (catalogue.pins), by the exposed name a call would use: not listed, not callable."""
    held_listed: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Prompts, resources and templates held for review: kind -> exposed key -> backend."""

    def offers(self, backend: str, capability: str) -> bool:
        """Whether `backend` declared `capability` (prompts, resources, completions)."""
        snapshot = self.snapshots.get(backend)
        return snapshot is not None and capability in snapshot.offers

    def unknown(self, backend: str) -> bool:
        """Whether `backend` was never listed (no snapshot, or none that succeeded): what it offers is not known."""
        snapshot = self.snapshots.get(backend)
        return snapshot is None or (snapshot.status != "ok" and not snapshot.offers and not snapshot.tools)


class VersionHash:
    """`snapshot_version`, fed one tool at a time, so pages can be dropped as they arrive."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256(b"[")  # the hash of the whole list encoded at once
        self._empty = True

    def add(self, tool: JsonObject) -> None:
        if not self._empty:
            self._sha.update(b",")
        self._sha.update(orjson.dumps(tool, option=orjson.OPT_SORT_KEYS))
        self._empty = False

    def hexdigest(self) -> str:
        sha = self._sha.copy()
        sha.update(b"]")
        return sha.hexdigest()[:16]


def snapshot_version(tools: Iterable[JsonObject]) -> str:
    """A stable hash of a tool list, so unchanged lists keep their version."""
    version = VersionHash()
    for tool in tools:
        version.add(tool)
    return version.hexdigest()


def combined_version(tools_version: str, list_versions: Mapping[str, str], offers: frozenset[str]) -> str:
    """A backend's version over its tools, other lists and offers; the tools' alone when it has nothing else."""
    if not list_versions and not offers:
        return tools_version
    parts = [tools_version, *(f"{k}:{v}" for k, v in sorted(list_versions.items())), ",".join(sorted(offers))]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


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
    serves_tasks = snapshot is not None and TASK_CALLS_OFFER in snapshot.offers
    for tool in snapshot.tools if snapshot else ():
        original = tool.name
        if _needs_tasks(tool):
            if not serves_tasks:
                hidden.append((backend, original))
                continue
            tool = replace(tool, needs=tool.needs | {TASK_TRAIT})  # listed to clients that can call it
        name = exposed_name(namespace, separator, original)
        if name != (f"{namespace}{separator}{original}" if namespace else original):
            renamed.append((backend, original, name))
        entries.append(ToolEntry(name, backend, _with_gateway_ui_uri(tool, namespace)))
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
    ordered: list[ToolEntry] = []
    collisions: list[Collision] = []
    renamed: list[tuple[str, str, str]] = []
    hidden: list[tuple[str, str]] = []
    for backend, namespace in order:
        named = _named(backend, namespace, separator, snapshots.get(backend), memo)
        renamed += named.renamed
        hidden += named.hidden
        for entry in named.entries:
            first = entries.get(entry.exposed)
            if first is None:
                entries[entry.exposed] = entry
            elif not (first.backend == backend and _other_era(first.tool, entry.tool)):
                collisions.append(Collision(entry.exposed, first.backend, backend))
                continue
            ordered.append(entry)
    version = _catalogue_version(order, snapshots)
    listings = {kind.name: merge_listing(kind, order, {b: s.lists.get(kind.name, ()) for b, s in snapshots.items()},
                                         separator) for kind in KINDS}
    header_tools = frozenset(entry.exposed for entry in ordered if entry.tool.header_arguments)
    gated = any(entry.tool.needs for entry in ordered)
    return Catalogue(version, tuple(ordered), entries, tuple(collisions),
                     tuple(renamed), tuple(hidden), dict(snapshots), listings, tuple(order), header_tools, gated)


def _other_era(one: Tool, other: Tool) -> bool:
    """Whether two tools of one name are a dual-era backend's listings for different eras (no client sees both)."""
    eras = one.needs & ERA_TRAITS, other.needs & ERA_TRAITS
    return bool(eras[0]) and bool(eras[1]) and eras[0] != eras[1]


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


def _with_gateway_ui_uri(tool: Tool, namespace: str) -> Tool:
    """The tool as clients see it: an MCP Apps UI resource it names is read through the gateway (uris.py)."""
    if not namespace or UI_RESOURCE_KEY not in tool.tail:
        return tool
    decoded = tool.decoded()
    return Tool.from_dict(decoded) if rewrite_ui_meta(decoded.get("_meta"), namespace) else tool


def _needs_tasks(tool: Tool) -> bool:
    if TASK_SUPPORT_KEY not in tool.tail:
        return False
    execution = tool.decoded().get("execution")
    return isinstance(execution, dict) and execution.get("taskSupport") == "required"


def _catalogue_version(order: Sequence[tuple[str, str]], snapshots: Mapping[str, BackendSnapshot]) -> str:
    parts = [f"{b}:{ns}:{snapshots[b].version if b in snapshots else '-'}" for b, ns in order]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def same_snapshot(a: BackendSnapshot, b: BackendSnapshot) -> bool:
    """Equal for the catalogue and admins (the version stands for the tools: no deep compare)."""
    return (a.version, a.status, a.error, a.fetched_at) == (b.version, b.status, b.error, b.fetched_at)
