"""Policy rules in the config: the gateway-wide `rules`, each tenant's `rules` and `default`.

Each rule is read into a `gateway.policy.Rule`: its `when` compiled (a bad condition is a config
error naming the key, line and column), its `arguments` checked as JSON Schemas. A tenant's
compiled policy is its gateway-wide rules that apply to it, then its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from typing import Any

from jsonschema import exceptions as schema_errors
from jsonschema import validators

from gateway.config.reader import ConfigError, Section, read
from gateway.policy import EFFECTS, Callers, Condition, ConditionError, Rule, TenantPolicy

CALLER_KEYS = ("subjects", "groups", "scopes")
ITEM_KEYS = ("tools", "prompts", "resources")
MAX_RULES = 10_000
"""Rules in one list; more is surely a generated config gone wrong."""


def rules_section(owner: Section, *, gateway_wide: bool) -> tuple[Rule, ...]:
    """The `rules` list of `owner` (the root, or one tenant)."""
    items = owner.items("rules", Rule)
    if len(items) > MAX_RULES:
        raise ConfigError(f"{owner.where('rules')}: more than {MAX_RULES} rules")
    rules = tuple(read(item, lambda s: _rule(s, gateway_wide)) for item in items)
    _check_unique_names(rules, owner.where("rules"))
    return rules


def tenant_policy(name: str, gateway_rules: Sequence[Rule], own: Sequence[Rule], default: str) -> TenantPolicy:
    """A tenant's compiled policy: the gateway-wide rules whose `callers.tenants` admit it, then its own."""
    applying = [rule for rule in gateway_rules
                if rule.callers.tenants is None or any(fnmatchcase(name, glob) for glob in rule.callers.tenants)]
    rules = (*applying, *own)
    _check_unique_names(rules, f"tenants.{name}.rules")
    return TenantPolicy(rules, default)


def default_effect(s: Section) -> str:
    effect = s.get("default", str)
    if effect not in EFFECTS:
        raise ConfigError(f"{s.where('default')}: must be allow or deny")
    return str(effect)


def check_rule_backends(rules: Iterable[Rule], names: set[str]) -> None:
    for rule in rules:
        for i, backend in enumerate(rule.backends or ()):
            if backend not in names:
                raise ConfigError(f"{rule.where}.backends[{i}]: unknown backend {backend!r}")


def _rule(s: Section, gateway_wide: bool) -> Rule:
    effect = s.required("effect", str)
    if effect not in EFFECTS:
        raise ConfigError(f"{s.where('effect')}: must be allow or deny")
    name = s.get("name", str)
    if name is not None and not name.strip():
        raise ConfigError(f"{s.where('name')}: must not be empty")
    selectors = {key: _globs(s, key) for key in ITEM_KEYS}
    rule = Rule(name=name or s.path, where=s.path, effect=effect, callers=_callers(s, gateway_wide),
                **selectors, backends=_globs(s, "backends"), when=_condition(s),
                arguments=_arguments(s), message=s.get("message", str))
    if rule.arguments is not None:
        if not rule.allows:
            raise ConfigError(f"{s.where('arguments')}: only an allow rule can limit arguments")
        if rule.tools is None and rule.selectors():
            raise ConfigError(f"{s.where('arguments')}: limits tool arguments, but the rule names no tools")
    return rule


def _globs(s: Section, key: str) -> tuple[str, ...] | None:
    """A list of strings, or None when the key is absent (it then does not narrow the rule)."""
    if key not in s.data:
        s.seen.add(key)
        return None
    return s.strings(key)


def _callers(s: Section, gateway_wide: bool) -> Callers:
    section = s.section("callers", Callers)
    if not gateway_wide and "tenants" in section.data:
        raise ConfigError(f"{section.where('tenants')}: only gateway-wide rules name tenants")
    keys = (*CALLER_KEYS, "tenants") if gateway_wide else CALLER_KEYS
    return read(section, lambda c: Callers(**{key: _globs(c, key) for key in keys}))


def _condition(s: Section) -> Condition | None:
    source = s.get("when", str)
    if source is None:
        return None
    try:
        return Condition.compile(source)
    except ConditionError as exc:
        raise ConfigError(f"{s.where('when')}: {exc}") from None


def _arguments(s: Section) -> dict[str, Any] | None:
    s.seen.add("arguments")
    raw = s.data.get("arguments")
    if raw is None:
        return None
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"{s.where('arguments')}: must be a mapping of argument names to JSON Schemas")
    for name, schema in raw.items():
        if not isinstance(schema, dict):
            raise ConfigError(f"{s.where('arguments')}.{name}: must be a JSON Schema (a mapping)")
        try:
            validators.Draft202012Validator.check_schema(schema)
        except schema_errors.SchemaError as exc:
            raise ConfigError(f"{s.where('arguments')}.{name}: not a valid JSON Schema ({exc.message})") from None
    return {str(name): schema for name, schema in raw.items()}


def _check_unique_names(rules: Sequence[Rule], where: str) -> None:
    seen: set[str] = set()
    for rule in rules:
        if rule.name in seen:
            raise ConfigError(f"{rule.where}.name: {rule.name!r} names another rule of {where} too")
        seen.add(rule.name)
