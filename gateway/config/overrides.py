"""`MCPGW_<SECTION>__<KEY>[__<KEY>…]` environment variables: one config key each, read as YAML.

Sections and keys match the file's without regard to case (`MCPGW_SERVER__PORT`). Where a key
is a name the operator chose (a tenant, a backend, an env variable or header of a backend) its
case is kept, and a name must already be in the file: `MCPGW_TENANTS__Acme__BACKENDS` changes
tenant `Acme`, while an override naming a tenant or backend the file does not define is an
error naming it, never a new entry with default policy. Backends are a list in the file and
are addressed by name: `MCPGW_BACKENDS__search__URL`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from gateway.config.reader import ConfigError

PREFIX = "MCPGW_"
SEPARATOR = "__"
NAMED = {"tenants": "tenant", "backends": "backend"}
"""Top-level collections of entries named in the file: an override never creates one."""
SECRETS = frozenset({"secret"})
"""Keys an override may not blank: an empty secret would fail every token, with no word why."""
FREE_FORM = frozenset({"env", "headers", "backend_headers"})
"""Mappings whose keys are names outside the gateway's vocabulary: a new key keeps its case."""


def apply_overrides(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Apply every override in `environ` to `data` (in place, sorted by name) and return it."""
    for variable, text in sorted(environ.items()):
        if variable.startswith(PREFIX) and SEPARATOR in variable:
            _set(data, variable, variable[len(PREFIX):].split(SEPARATOR), text)
    return data


def _set(data: dict[str, Any], variable: str, keys: list[str], text: str) -> None:
    node: Any = data
    path: list[str] = []
    for key in keys[:-1]:
        node = _child(node, variable, path, key)
    if isinstance(node, list):
        raise ConfigError(f"{_where(path)}: {variable} must name a key of one {NAMED[path[0]]}")
    if path == ["tenants"]:
        _existing(node, variable, path, keys[-1])  # a tenant's whole entry may be replaced, never created
    key = _key_for(node, variable, path, keys[-1])
    value = _parse(variable, [*path, key], text)
    if key in SECRETS and value in (None, ""):
        raise ConfigError(f"{_where([*path, key])}: {variable} is empty; unset it to keep the file's value")
    node[key] = value


def _parse(variable: str, path: list[str], text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{_where(path)}: {variable} is not valid YAML") from exc


def _where(path: list[str]) -> str:
    return ".".join(path) or "<root>"


def _child(node: Any, variable: str, path: list[str], key: str) -> Any:
    """The next node down, created as a mapping when missing (but never a named entry)."""
    if isinstance(node, list):
        child = _entry_named(node, variable, path, key)
        path.append(str(child["name"]))
        return child
    if not isinstance(node, dict):
        raise ConfigError(f"{_where(path)}: {variable} needs a mapping here")
    name = _existing(node, variable, path, key) if path == ["tenants"] else _key_for(node, variable, path, key)
    if not isinstance(node.get(name), dict | list):
        node[name] = [] if not path and name == "backends" else {}
    path.append(name)
    return node[name]


def _entry_named(entries: list[Any], variable: str, path: list[str], name: str) -> dict[str, Any]:
    for entry in entries:
        if isinstance(entry, dict) and str(entry.get("name", "")).lower() == name.lower():
            return entry
    kind = NAMED.get(path[0], "entry")
    raise ConfigError(f"{_where([*path, name])}: {variable} names a {kind} the config file does not define")


def _existing(node: dict[str, Any], variable: str, path: list[str], key: str) -> str:
    found = _match(node, variable, key)
    if found is None:
        raise ConfigError(f"{_where([*path, key])}: {variable} names a {NAMED[path[0]]} "
                            "the config file does not define")
    return found


def _key_for(node: dict[str, Any], variable: str, path: list[str], key: str) -> str:
    """The file's own spelling of `key`; a new key is lower-case, unless it is a free-form name.

    `path` is section, entry name, key in the entry: `backends.clock.env`, `tenants.Acme.backend_headers`.
    """
    found = _match(node, variable, key)
    if found is not None:
        return found
    return key if len(path) >= 3 and path[2] in FREE_FORM else key.lower()


def _match(node: dict[str, Any], variable: str, key: str) -> str | None:
    """`key` itself, else the one key equal to it ignoring case; two such keys make it ambiguous."""
    if key in node:
        return key
    folded = [str(k) for k in node if str(k).lower() == key.lower()]
    if len(folded) > 1:
        raise ConfigError(f"{key}: {variable} could mean {' or '.join(sorted(folded))}")
    return folded[0] if folded else None
