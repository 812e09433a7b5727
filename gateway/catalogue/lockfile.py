"""The lockfile: approved fingerprints in a JSON file meant for review in Git (`integrity.lockfile`).

    {"version": 1, "backends": {"github": {"tools/create_issue": {"fingerprint": "…", "definition": {…}}}}}

Keys sorted and indented, so a change of one tool is a small diff. The gateway reads it at start;
`mcp-gateway pins export` writes it. An item is approved when its fingerprint is the lockfile's or
the shared store's (an approval made since the file was written).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import orjson

from gateway.catalogue.fingerprints import ItemKey, fingerprint, key_text, parse_key
from gateway.catalogue.pinstore import Pin, Pins

LOCKFILE_VERSION = 1


class LockfileError(ValueError):
    """The lockfile cannot be read; the message names the file and the problem."""


def read_lockfile(path: str | None) -> dict[str, Pins]:
    """Approvals by backend; none for no path or a file not written yet."""
    if path is None or not Path(path).exists():
        return {}
    try:
        data = orjson.loads(Path(path).read_bytes())
        if data.get("version") != LOCKFILE_VERSION or not isinstance(data.get("backends"), dict):
            raise LockfileError(f"{path}: not a version {LOCKFILE_VERSION} lockfile")
        return {str(backend): _pins(path, backend, items) for backend, items in data["backends"].items()}
    except (OSError, orjson.JSONDecodeError, AttributeError) as exc:
        raise LockfileError(f"{path}: cannot be read ({type(exc).__name__})") from None


def _pins(path: str, backend: str, items: object) -> Pins:
    if not isinstance(items, dict):
        raise LockfileError(f"{path}: backends.{backend} must be a mapping of KIND/NAME to approvals")
    pins: Pins = {}
    for text, entry in items.items():
        try:
            key = parse_key(text)
        except ValueError as exc:
            raise LockfileError(f"{path}: backends.{backend}: {exc}") from None
        if not isinstance(entry, dict) or "definition" not in entry:
            raise LockfileError(f"{path}: backends.{backend}.{text}: needs a definition")
        # The fingerprint is computed again: a hand-edited definition cannot keep an old approval.
        pins[key] = Pin(fingerprint(entry["definition"]), entry["definition"], 0.0, "lockfile")
    return pins


def lockfile_bytes(approved: Mapping[str, Mapping[ItemKey, Pin]]) -> bytes:
    backends = {backend: {key_text(key): {"fingerprint": pin.fingerprint, "definition": pin.definition}
                          for key, pin in pins.items()}
                for backend, pins in approved.items() if pins}
    return orjson.dumps({"version": LOCKFILE_VERSION, "backends": backends},
                        option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)


def write_lockfile(path: str, approved: Mapping[str, Mapping[ItemKey, Pin]]) -> None:
    """Written beside the target, then renamed over it: a reader never sees half a file."""
    temporary = f"{path}.tmp"
    Path(temporary).write_bytes(lockfile_bytes(approved))
    os.replace(temporary, path)
