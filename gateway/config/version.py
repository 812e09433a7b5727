"""A short fingerprint of a config, the same in every process that loaded the same settings.

The status page shows it per replica, so a replica that missed a reload stands out. It is
computed from the loaded values (after `${VAR}` expansion and `MCPGW_` overrides), in a form
that does not depend on the process (sets are sorted, mappings by key): two replicas given the
same file and environment agree. Only a hash prefix is shown, never a value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any

import orjson

from gateway.config.model import Config

VERSION_CHARS = 12


def config_version(config: Config) -> str:
    """The fingerprint of `config`: 12 hex characters."""
    canonical = orjson.dumps(_plain(config), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()[:VERSION_CHARS]


def _plain(value: Any) -> Any:
    """`value` as JSON types, independent of hash seeds and insertion order of mappings."""
    if is_dataclass(value) and not isinstance(value, type):
        return {"__class__": type(value).__name__, **{f.name: _plain(getattr(value, f.name)) for f in fields(value)}}
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((_plain(item) for item in value), key=repr)
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)
