"""The config reference page (docs/reference/config.md) cannot drift from the config code.

The YAML block under "Every key and its default" must parse; its keys must be exactly the keys the
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

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "config.md"
ENVIRON = {"ACME_SEARCH_KEY": "k", "GITHUB_CLIENT_SECRET": "s", "ACME_EXCHANGE_SECRET": "s"}
FREE_FORM = {"env", "headers", "backend_headers", "arguments", "resource_attributes", "tool_scopes", "fixed"}
"""Mappings of names to values: their keys are the operator's, not config keys (a rule's `arguments` and
`auth.tool_scopes` too)."""
NAMED = {"tenants", "tenants.*.backend_auth", "servers"}
"""Mappings of names to entries: every entry has the same keys."""
ALIASES = {f"{kind}_{rule}": f"{kind}.{rule}"
           for kind in ("tools", "prompts", "resources") for rule in ("allow", "deny")}
"""Fields read from a nested key."""
NOT_KEYS = {"tenants.*.name", "tenants.*.policy", "rules[].where", "tenants.*.rules[].where",
            "tenants.*.rules[].callers.tenants", "servers.*.name", "servers.*.tools[].where",
            "servers.*.prompts[].where", "servers.*.resources[].where", "servers.*.templates[].where"}
"""Fields filled from elsewhere (a tenant's name is its key in `tenants`, its compiled policy comes from its
rules, a rule's key path from where it stands) or not allowed there (tenants are named by gateway-wide rules)."""
LEAVES = {"rules[].when", "tenants.*.rules[].when"}
"""Fields written as one value (a CEL condition's source) though the code holds an object."""
DISCRIMINATOR = {"backends[].transport"}
"""A key that picks the type rather than filling a field."""
SAME_KEYS = {"tenants.*.backend_auth.*.": "backends[].auth."}
"""Entries of one type documented once: a tenant's `backend_auth` entry is a backend's `auth`."""


def same_keys(keys: set[str]) -> set[str]:
    for prefix, documented_at in SAME_KEYS.items():
        keys = {documented_at + key[len(prefix):] if key.startswith(prefix) else key for key in keys}
    return keys


def reference() -> dict[str, Any]:
    text = PAGE.read_text(encoding="utf-8")
    block = re.search(r"## Every key and its default\n.*?```yaml\n(.*?)```", text, re.DOTALL)
    assert block, f"{PAGE} has no yaml block under '## Every key and its default'"
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
        if child in LEAVES:
            yield child
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
    raw_documented, raw_code = set(documented_keys(reference())), set(code_keys(Config))
    documented, code = same_keys(raw_documented), same_keys(raw_code)
    assert code - documented == set(), "in the code, missing from docs/reference/config.md"
    # `rate_limit: null`, `rules: []`: a section or list shown empty
    null_sections = {key for key in raw_documented if any(c.startswith((f"{key}.", f"{key}[]")) for c in raw_code)}
    assert documented - code - DISCRIMINATOR - null_sections == set(), "in docs/reference/config.md, not in the code"


def test_the_sections_show_the_code_defaults() -> None:
    documented, defaults = parse_config(reference(), ENVIRON), Config()
    for section in ("server", "store", "catalogue", "upstream", "admin", "metrics", "logging"):
        assert getattr(documented, section) == getattr(defaults, section), section
    assert dataclasses.replace(documented.oauth, confirm_user=None) == defaults.oauth  # shown set, to name its keys
    jwt_and_metadata = ("jwt", "resource_metadata", "token_sources", "query_param", "anonymous_tenant")
    for key in jwt_and_metadata:
        assert getattr(documented.auth, key) == getattr(defaults.auth, key), f"auth.{key}"


def test_the_defaults_entries_show_the_code_defaults() -> None:
    raw = reference()
    documented = parse_config(raw, ENVIRON)
    required = {k: raw["backends"][0][k] for k in ("name", "transport", "command")}
    bare = parse_config({"backends": [required], "tenants": {"defaults": {}}}, {})
    assert documented.backends[0] == bare.backends[0]
    own = dataclasses.replace(documented.tenants["defaults"], policy=bare.tenants["defaults"].policy)  # + gateway-wide
    assert own == bare.tenants["defaults"]
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
