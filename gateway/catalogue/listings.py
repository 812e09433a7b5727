"""Prompts, resources and resource templates: what each kind is, and its merge. Pure.

Each kind is merged like tools: every backend's items under their exposed key, in config
order, the first backend winning a collision. Prompt names follow the tool naming rules
(namespace, separator, length, charset); resource URIs and URI templates become gateway URIs
(catalogue/uris.py). Items are kept as compact JSON and only their key is ever replaced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.catalogue.namespace import exposed_name
from gateway.catalogue.uris import gateway_uri
from gateway.protocol import spec

JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of listed item besides tools, and the protocol names that go with it."""

    name: str  # prompts | resources | templates
    key: str  # the member that names an item: name, uri or uriTemplate
    list_method: str
    result_key: str  # the member of the list result that holds the items
    capability: str  # the server capability that offers this kind (and the tenant globs that filter it)
    list_changed: str  # what clients are sent when their view of this kind changed
    unknown: str  # the start of the error for a key nobody offers this tenant

    def exposed(self, namespace: str, separator: str, key: str) -> str:
        if self.key == "name":
            return exposed_name(namespace, separator, key)
        return gateway_uri(namespace, key)


PROMPTS = Kind("prompts", "name", spec.PROMPTS_LIST, "prompts", "prompts", spec.PROMPTS_LIST_CHANGED,
               "Unknown prompt")
RESOURCES = Kind("resources", "uri", spec.RESOURCES_LIST, "resources", "resources", spec.RESOURCES_LIST_CHANGED,
                 "Unknown resource")
TEMPLATES = Kind("templates", "uriTemplate", spec.RESOURCES_TEMPLATES_LIST, "resourceTemplates", "resources",
                 spec.RESOURCES_LIST_CHANGED, "Unknown resource template")
KINDS = (PROMPTS, RESOURCES, TEMPLATES)
BY_NAME = {kind.name: kind for kind in KINDS}

OFFERED = ("tools", "prompts", "resources", "completions", "logging")
"""Server capabilities whose presence in a backend's initialize result the catalogue records."""
SUBSCRIBE = "resources.subscribe"
"""Recorded too when a backend declared `resources: {subscribe: true}` (it serves resources/subscribe)."""
TASKS_OFFER = "extensions.tasks"
"""Recorded when a 2026 backend advertised the tasks extension in server/discover (upstream.base drops it
from a handshake's capabilities: the extension does not apply there)."""
TASK_CALLS_OFFER = "tasks.requests.tools.call"
"""Recorded when a handshake-era backend declared 2025-11-25 task-augmented tools/call (dispatch.session_tasks)."""


@dataclass(frozen=True, slots=True)
class Listed:
    """One backend item as compact JSON: its key, and the object after the key member."""

    key: str
    tail: bytes  # b',"description":…}' or b'}'

    @classmethod
    def from_dict(cls, kind: Kind, raw: Any) -> Listed | None:
        """None for what is not an item of `kind` (no string key, or JSON orjson cannot write)."""
        if not isinstance(raw, dict) or not isinstance(raw.get(kind.key), str) or not raw[kind.key]:
            return None
        try:
            rest = orjson.dumps({k: v for k, v in raw.items() if k != kind.key})
        except TypeError:
            return None
        return cls(raw[kind.key], b"}" if rest == b"{}" else b"," + rest[1:])

    def json(self, kind: Kind, key: str | None = None) -> bytes:
        return b'{"' + kind.key.encode() + b'":' + orjson.dumps(self.key if key is None else key) + self.tail

    def decoded(self, kind: Kind) -> JsonObject:
        return orjson.loads(self.json(kind))


@dataclass(frozen=True, slots=True)
class ListedEntry:
    exposed: str
    backend: str
    item: Listed

    @property
    def original(self) -> str:
        return self.item.key

    def json(self, kind: Kind) -> bytes:
        """The item as clients see it: the backend's, with only its key replaced."""
        return self.item.json(kind, self.exposed)


@dataclass(frozen=True, slots=True)
class Listing:
    """One kind across every backend: entries in config order, and by exposed key."""

    entries: tuple[ListedEntry, ...] = ()
    by_key: Mapping[str, ListedEntry] = field(default_factory=dict)
    collisions: tuple[tuple[str, str, str], ...] = ()  # (exposed, winner, loser)


def merge_listing(kind: Kind, order: Sequence[tuple[str, str]], items: Mapping[str, Iterable[Listed]],
                  separator: str) -> Listing:
    """The merged listing of `kind` from `(backend, namespace)` pairs in config order and each backend's items."""
    entries: dict[str, ListedEntry] = {}
    collisions = []
    for backend, namespace in order:
        for item in items.get(backend, ()):
            exposed = kind.exposed(namespace, separator, item.key)
            if exposed in entries:
                collisions.append((exposed, entries[exposed].backend, backend))
            else:
                entries[exposed] = ListedEntry(exposed, backend, item)
    return Listing(tuple(entries.values()), entries, tuple(collisions))


def usable_items(kind: Kind, raw_items: Iterable[Any]) -> tuple[list[Listed], list[Any]]:
    """The items a client can use, and the raw ones they came from (for the version hash)."""
    kept, raws = [], []
    for raw in raw_items:
        item = Listed.from_dict(kind, raw)
        if item is not None:
            kept.append(item)
            raws.append(raw)
    return kept, raws
