"""Policy rules in the config: read into compiled rules, every mistake a config error naming its key."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import ConfigError, parse_config
from gateway.policy import ALLOW, DENY, Item, Principal

BACKENDS = [{"name": "crm", "transport": "stdio", "command": ["x"]}]


def config(rules: list[dict[str, Any]] | None = None, *, gateway_rules: list[dict[str, Any]] | None = None,
           **tenant: Any) -> Any:
    raw: dict[str, Any] = {"backends": BACKENDS,
                           "tenants": {"acme": {"backends": ["*"], **({"rules": rules} if rules else {}), **tenant},
                                       "other": {"backends": ["*"]}}}
    if gateway_rules:
        raw["rules"] = gateway_rules
    return parse_config(raw, {})


def refused(rules: list[dict[str, Any]] | None = None, **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        config(rules, **kwargs)
    return str(caught.value)


def test_a_tenant_without_rules_allows_everything_as_before() -> None:
    policy = config().tenants["acme"].policy
    assert (policy.rules, policy.default) == ((), ALLOW)


def test_rules_compile_with_their_key_path_as_default_name() -> None:
    policy = config([{"effect": "deny", "tools": ["crm__delete_*"]},
                     {"name": "leads", "effect": "allow", "callers": {"groups": ["billing-leads"]},
                      "when": "request.arguments.amount <= 500", "arguments": {"amount": {"maximum": 500}}}],
                    default="deny").tenants["acme"].policy
    assert [r.name for r in policy.rules] == ["tenants.acme.rules[0]", "leads"]
    assert policy.default == DENY
    assert policy.rules[1].when is not None and policy.rules[1].when.reads_request


def test_gateway_wide_rules_come_first_and_only_where_their_tenants_match() -> None:
    loaded = config([{"name": "own", "effect": "allow"}],
                    gateway_rules=[{"name": "everywhere", "effect": "deny", "tools": ["*__delete_*"]},
                                   {"name": "acme-only", "effect": "deny", "callers": {"tenants": ["ac*"]}}])
    assert [r.name for r in loaded.tenants["acme"].policy.rules] == ["everywhere", "acme-only", "own"]
    assert [r.name for r in loaded.tenants["other"].policy.rules] == ["everywhere"]


def test_a_bad_condition_names_its_key_line_and_column() -> None:
    assert refused([{"effect": "allow", "when": "request.arguments.amount <="}]).startswith(
        "tenants.acme.rules[0].when: line 1, column 28: Syntax error")


def test_an_undeclared_name_in_a_condition_is_caught_at_load() -> None:
    message = refused([{"effect": "allow", "when": "prinicpal.groups.exists(g, g == 'x')"}])
    assert message.startswith("tenants.acme.rules[0].when: line 1, column")
    assert "undeclared reference to 'prinicpal" in message


def test_a_condition_must_be_boolean() -> None:
    assert refused([{"effect": "allow", "when": "1 + 2"}]) == (
        "tenants.acme.rules[0].when: must be a boolean expression, not int")


@pytest.mark.parametrize(("rule", "message"), [
    ({"tools": ["x"]}, "tenants.acme.rules[0].effect: required"),
    ({"effect": "maybe"}, "tenants.acme.rules[0].effect: must be allow or deny"),
    ({"effect": "allow", "tools": "crm__*"}, "tenants.acme.rules[0].tools: must be a list"),
    ({"effect": "allow", "callers": {"groups": [1]}}, "tenants.acme.rules[0].callers.groups[0]: must be a string"),
    ({"effect": "allow", "callers": {"team": ["x"]}}, "tenants.acme.rules[0].callers.team: unknown key"),
    ({"effect": "allow", "callers": {"tenants": ["x"]}},
     "tenants.acme.rules[0].callers.tenants: only gateway-wide rules name tenants"),
    ({"effect": "allow", "backends": ["nope"]}, "tenants.acme.rules[0].backends[0]: unknown backend 'nope'"),
    ({"effect": "allow", "colour": 1}, "tenants.acme.rules[0].colour: unknown key"),
    ({"effect": "deny", "arguments": {"a": {"maximum": 1}}},
     "tenants.acme.rules[0].arguments: only an allow rule can limit arguments"),
    ({"effect": "allow", "prompts": ["*"], "arguments": {"a": {"maximum": 1}}},
     "tenants.acme.rules[0].arguments: limits tool arguments, but the rule names no tools"),
    ({"effect": "allow", "arguments": {"a": 5}},
     "tenants.acme.rules[0].arguments.a: must be a JSON Schema (a mapping)"),
    ({"effect": "allow", "arguments": {"a": {"maximum": "x"}}},
     "tenants.acme.rules[0].arguments.a: not a valid JSON Schema ('x' is not of type 'number')"),
    ({"effect": "allow", "name": " "}, "tenants.acme.rules[0].name: must not be empty"),
])
def test_each_mistake_is_reported_with_its_key(rule: dict[str, Any], message: str) -> None:
    assert refused([rule]) == message


def test_two_rules_of_one_tenant_may_not_share_a_name() -> None:
    assert refused([{"name": "a", "effect": "allow"}, {"name": "a", "effect": "deny"}]) == (
        "tenants.acme.rules[1].name: 'a' names another rule of tenants.acme.rules too")


def test_the_default_is_allow_or_deny() -> None:
    assert refused(default="maybe") == "tenants.acme.default: must be allow or deny"


def test_api_keys_carry_groups_and_the_jwt_groups_claim_is_configurable() -> None:
    loaded = parse_config({"auth": {"jwt": {"groups_claim": "realm_access.roles"},
                                    "api_keys": [{"sha256": "a" * 64, "tenant": "acme", "subject": "bot",
                                                  "groups": ["bots"]}]},
                           "tenants": {"acme": {}}}, {})
    assert loaded.auth.jwt.groups_claim == "realm_access.roles"
    assert loaded.auth.api_keys[0].groups == ("bots",)


def test_a_reloaded_config_with_the_same_rules_is_equal() -> None:
    rules = [{"effect": "allow", "when": "'a' in principal.groups"}]
    assert config(rules).tenants["acme"] == config(rules).tenants["acme"]
    assert config(rules).tenants["acme"] != config([{"effect": "deny"}]).tenants["acme"]


def test_the_compiled_policy_decides() -> None:
    policy = config([{"effect": "allow", "callers": {"groups": ["leads"]}, "tools": ["crm__refund"]}],
                    default="deny").tenants["acme"].policy
    item = Item("tools", "crm__refund", "crm")
    assert policy.decide(Principal("acme", "a", groups=frozenset({"leads"})), item).allowed
    assert not policy.decide(Principal("acme", "b"), item).allowed
