"""README's config reference cannot drift from the config code.

The YAML block under "Config reference" must parse; its keys must be exactly the keys the
config types hold (walked from `Config` down); and every value it shows for the `defaults`
backend and tenant and for the sections is the value the code gives when the key is left out.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from gateway.config import Config, parse_config

README = Path(__file__).resolve().parents[2] / "README.md"
ENVIRON = {"ACME_SEARCH_KEY": "k"}
FREE_FORM = {"env", "headers", "backend_headers"}
"""Mappings of names to values: their keys are the operator's, not config keys."""
NAMED = {"tenants"}
"""Mappings of names to entries: every entry has the same keys."""
ALIASES = {f"{kind}_{rule}": f"{kind}.{rule}"
           for kind in ("tools", "prompts", "resources") for rule in ("allow", "deny")}
"""Fields read from a nested key."""
NOT_KEYS = {"tenants.*.name"}
"""Fields filled from elsewhere (a tenant's name is its key in `tenants`)."""
DISCRIMINATOR = {"backends[].transport"}
"""A key that picks the type rather than filling a field."""


def reference() -> dict[str, Any]:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"### Config reference\n.*?```yaml\n(.*?)```", text, re.DOTALL)
    assert block, "README has no Config reference block"
    return yaml.safe_load(block.group(1))


def documented_keys(node: Any, path: str = "") -> Iterator[str]:
    if isinstance(node, list) and node and all(isinstance(item, dict) for item in node):
        for item in node:
            yield from documented_keys(item, f"{path}[]")
    elif isinstance(node, dict) and node and path.split(".")[-1] not in FREE_FORM:
        for key, value in node.items():
            yield from documented_keys(value, f"{path}.*" if path in NAMED else f"{path}.{key}".lstrip("."))
    else:
        yield path


def code_keys(cls: type, path: str = "") -> Iterator[str]:
    for field in dataclasses.fields(cls):
        key = ALIASES.get(field.name, field.name)
        child = f"{path}.{key}".lstrip(".")
        if child in NOT_KEYS:
            continue
        yield from _keys_of_type(typing.get_type_hints(cls)[field.name], child)


def _keys_of_type(hint: Any, path: str) -> Iterator[str]:
    inner = [a for a in typing.get_args(hint) if a is not type(None) and a is not Ellipsis]
    origin = typing.get_origin(hint)
    entries = [a for a in inner if dataclasses.is_dataclass(a)]
    if dataclasses.is_dataclass(hint):
        yield from code_keys(hint, path)
    elif origin is tuple and entries:
        yield from {k for entry in entries for k in code_keys(entry, f"{path}[]")}
    elif origin in (types.UnionType, typing.Union) and entries:
        yield from {k for entry in entries for k in code_keys(entry, path)}
    elif origin in (Mapping, dict) and entries:
        yield from code_keys(entries[0], f"{path}.*")
    elif origin is tuple and inner and typing.get_origin(inner[0]) in (types.UnionType, typing.Union):
        yield from {k for u in typing.get_args(inner[0]) if dataclasses.is_dataclass(u)
                    for k in code_keys(u, f"{path}[]")}
    else:
        yield path


def test_the_reference_parses_as_a_config() -> None:
    parse_config(reference(), ENVIRON)


def test_every_key_the_code_reads_is_documented_and_nothing_else() -> None:
    documented = set(documented_keys(reference()))
    code = set(code_keys(Config))
    assert code - documented == set(), "in the code, missing from README's reference"
    null_sections = {key for key in documented if any(c.startswith(f"{key}.") for c in code)}  # `rate_limit: null`
    assert documented - code - DISCRIMINATOR - null_sections == set(), "in README's reference, unknown to the code"


def test_the_sections_show_the_code_defaults() -> None:
    documented, defaults = parse_config(reference(), ENVIRON), Config()
    for section in ("server", "store", "catalogue", "upstream", "admin", "metrics", "logging"):
        assert getattr(documented, section) == getattr(defaults, section), section
    jwt_and_metadata = ("jwt", "resource_metadata", "token_sources", "query_param", "anonymous_tenant")
    for key in jwt_and_metadata:
        assert getattr(documented.auth, key) == getattr(defaults.auth, key), f"auth.{key}"


def test_the_defaults_entries_show_the_code_defaults() -> None:
    raw = reference()
    documented = parse_config(raw, ENVIRON)
    required = {k: raw["backends"][0][k] for k in ("name", "transport", "command")}
    bare = parse_config({"backends": [required], "tenants": {"defaults": {}}}, {})
    assert documented.backends[0] == bare.backends[0]
    assert documented.tenants["defaults"] == bare.tenants["defaults"]
    key = raw["auth"]["api_keys"][0]
    bare_key = {k: key[k] for k in ("sha256", "tenant", "subject")}
    assert documented.auth.api_keys[0] == parse_config({"auth": {"api_keys": [bare_key]},
                                                        "tenants": {"defaults": {}}}, {}).auth.api_keys[0]


def test_the_http_entry_shows_the_code_defaults_for_its_own_keys() -> None:
    raw = reference()
    search = raw["backends"][1]
    documented = parse_config(raw, ENVIRON).backends[1]
    bare = parse_config({"backends": [{k: search[k] for k in ("name", "transport", "url")}]}, {}).backends[0]
    assert documented == bare
