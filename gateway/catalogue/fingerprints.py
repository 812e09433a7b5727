"""Fingerprints of what a backend lists, and readable diffs between two definitions. Pure.

A fingerprint is the SHA-256 of an item's canonical JSON (keys sorted at every depth, no
whitespace, UTF-8): the whole object as the backend lists it, its own name or URI included. The
gateway passes every member of an item to clients unchanged except that key (which it renames),
so every member counts: title, description, inputSchema, outputSchema, annotations, icons,
execution, a prompt's arguments, a resource's mimeType and size, `_meta`, and any member a later
revision adds. Items are keyed by (kind, the backend's own name or URI): a rename is a removal
and a new item, never a change that keeps an approval.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from gateway.catalogue.listings import BY_NAME
from gateway.catalogue.merge import BackendSnapshot

JsonObject = dict[str, Any]
ItemKey = tuple[str, str]
"""(kind, the backend's own name or URI): kind is tools, prompts, resources or templates."""
KIND_ORDER = ("tools", "prompts", "resources", "templates")
MAX_DIFF_LINES = 60
"""A logged diff stops here (the admin view and `pins diff` give it whole)."""


def canonical(item: Any) -> bytes:
    return orjson.dumps(item, option=orjson.OPT_SORT_KEYS)


def fingerprint(item: Any) -> str:
    return hashlib.sha256(canonical(item)).hexdigest()


def definitions(snapshot: BackendSnapshot) -> dict[ItemKey, Any]:
    """Every item of a snapshot, decoded, by key. A dual-era backend may list one tool twice (once per
    era): then the key's definition is the list of both, so either changing changes the fingerprint."""
    found: dict[ItemKey, Any] = {}
    for key, item in _items(snapshot):
        if key in found:
            earlier = found[key]
            found[key] = [*earlier, item] if isinstance(earlier, list) else [earlier, item]
        else:
            found[key] = item
    return found


def _items(snapshot: BackendSnapshot) -> Iterator[tuple[ItemKey, JsonObject]]:
    for tool in snapshot.tools:
        yield ("tools", tool.name), tool.decoded()
    for name, items in snapshot.lists.items():
        kind = BY_NAME[name]
        for listed in items:
            yield (name, listed.key), listed.decoded(kind)


def key_text(key: ItemKey) -> str:
    """How an item is named in logs and replies: `tools/create_issue`."""
    return f"{key[0]}/{key[1]}"


def parse_key(text: str) -> ItemKey:
    """The inverse of `key_text`; ValueError for anything else."""
    kind, sep, name = text.partition("/")
    if not sep or kind not in KIND_ORDER or not name:
        raise ValueError(f"name an item as KIND/NAME, KIND one of {', '.join(KIND_ORDER)}: {text[:200]!r}")
    return kind, name


def diff(old: Any, new: Any) -> list[str]:
    """What changed between two definitions: a unified diff of the description, then one line per
    other changed member, as `~ /inputSchema/properties/path: "a" -> "b"` (JSON pointers)."""
    lines: list[str] = []
    old_text, new_text = _description(old), _description(new)
    if old_text != new_text:
        lines += difflib.unified_diff(old_text.splitlines(), new_text.splitlines(), "description (approved)",
                                      "description (new)", lineterm="")
    lines += _changes(_without_description(old), _without_description(new), "")
    return lines


def short(lines: list[str]) -> str:
    kept = lines[:MAX_DIFF_LINES]
    if len(lines) > MAX_DIFF_LINES:
        kept.append(f"... {len(lines) - MAX_DIFF_LINES} more lines")
    return "\n".join(kept)


def _description(item: Any) -> str:
    value = item.get("description") if isinstance(item, dict) else None
    return value if isinstance(value, str) else ""


def _without_description(item: Any) -> Any:
    return {k: v for k, v in item.items() if k != "description"} if isinstance(item, dict) else item


def _changes(old: Any, new: Any, path: str) -> Iterator[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            pointer = f"{path}/{_escaped(key)}"
            if key not in new:
                yield f"- {pointer}: {_shown(old[key])}"
            elif key not in old:
                yield f"+ {pointer}: {_shown(new[key])}"
            else:
                yield from _changes(old[key], new[key], pointer)
    elif old != new or type(old) is not type(new):
        yield f"~ {path or '/'}: {_shown(old)} -> {_shown(new)}"


def _escaped(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _shown(value: Any) -> str:
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return text if len(text) <= 200 else text[:200] + "..."


def by_kind(keys: Mapping[ItemKey, Any]) -> dict[str, int]:
    counts = dict.fromkeys(KIND_ORDER, 0)
    for kind, _ in keys:
        counts[kind] += 1
    return counts
