"""The one decision: rules in order, first match decides, conditions on the caller and on the request."""

from __future__ import annotations

import pytest

from gateway.policy import ALLOW, DENY, Callers, Condition, Item, Principal, Rule, TenantPolicy

ALICE = Principal("acme", "alice", frozenset({"crm:read"}), groups=frozenset({"support"}))
BOB = Principal("acme", "bob", groups=frozenset({"support", "billing-leads"}), claims={"department": "finance"})
BOT = Principal("acme", "ci-bot", groups=frozenset({"bots"}))
REFUND = Item("tools", "crm__refund", "crm")
READ = Item("tools", "crm__read_order", "crm")
PUSH = Item("tools", "git__push", "git")


def rule(name: str, effect: str = ALLOW, *, when: str | None = None, **keys: object) -> Rule:
    callers = {k: keys.pop(k) for k in ("subjects", "groups", "scopes", "tenants") if k in keys}
    return Rule(name=name, where=f"rules[{name}]", effect=effect, callers=Callers(**callers),  # type: ignore[arg-type]
                when=Condition.compile(when) if when else None, **keys)  # type: ignore[arg-type]


def policy(*rules: Rule, default: str = ALLOW) -> TenantPolicy:
    return TenantPolicy(tuple(rules), default)


def test_no_rules_allow_everything_as_before() -> None:
    assert policy().decide(ALICE, REFUND).allowed
    assert not policy(default=DENY).decide(ALICE, REFUND).allowed


def test_the_first_rule_that_applies_decides() -> None:
    rules = policy(rule("read", tools=("crm__read_*",)), rule("no-crm", DENY, tools=("crm__*",)))
    assert rules.decide(ALICE, READ).rule_name == "read"
    decision = rules.decide(ALICE, REFUND)
    assert (decision.allowed, decision.rule_name, decision.reason) == (False, "no-crm", "rule")
    assert rules.decide(ALICE, PUSH).rule_name == "default"


def test_every_caller_key_given_must_match() -> None:
    leads = rule("leads", groups=("billing-*",), scopes=("crm:*",), tools=("crm__refund",))
    rules = policy(leads, default=DENY)
    assert not rules.decide(BOB, REFUND).allowed  # the group matches, no scope does
    both = Principal("acme", "carol", frozenset({"crm:write"}), groups=frozenset({"billing-leads"}))
    assert rules.decide(both, REFUND).allowed


def test_items_are_named_by_kind_and_backend() -> None:
    rules = policy(rule("crm-prompts", DENY, prompts=("*",), backends=("crm",)))
    assert rules.decide(ALICE, REFUND).allowed  # a tool: the rule names only prompts
    assert not rules.decide(ALICE, Item("prompts", "crm__summary", "crm")).allowed
    assert rules.decide(ALICE, Item("prompts", "git__summary", "git")).allowed


def test_resources_name_uris_and_templates_alike() -> None:
    rules = policy(rule("files", DENY, resources=("files+file:///etc/*",)))
    assert not rules.decide(ALICE, Item("resources", "files+file:///etc/passwd", "files")).allowed
    assert not rules.decide(ALICE, Item("templates", "files+file:///etc/{name}", "files")).allowed


def test_a_rule_without_item_keys_names_every_item() -> None:
    rules = policy(rule("bots", DENY, groups=("bots",)))
    assert not rules.decide(BOT, Item("resources", "x+y://z", "x")).allowed
    assert rules.decide(ALICE, PUSH).allowed


def test_a_caller_condition_is_decided_once_per_caller_and_lists_too() -> None:
    finance = rule("finance", when="principal.claims.department == 'finance'", tools=("crm__refund",))
    rules = policy(finance, default=DENY)
    assert rules.decide(BOB, REFUND).allowed and not rules.decide(BOB, REFUND).conditional
    assert not rules.decide(ALICE, REFUND).allowed  # no such claim: an error, which does not allow


def test_a_request_condition_lists_the_item_and_decides_the_call() -> None:
    limit = rule("limit", when="request.arguments.amount <= 500", tools=("crm__refund",))
    rules = policy(limit, default=DENY)
    listed = rules.decide(BOB, REFUND)
    assert listed.allowed and listed.conditional
    assert rules.decide(BOB, REFUND, {"amount": 100}).allowed
    refused = rules.decide(BOB, REFUND, {"amount": 900})
    assert (refused.allowed, refused.reason, refused.unmet) == (False, "condition", limit)
    assert "limit" in refused.refusal()
    assert not rules.decide(BOB, REFUND, {}).allowed  # no amount: an error counts against the caller


def test_a_conditional_deny_is_passed_over_when_listing() -> None:
    big = rule("big", DENY, when="request.arguments.amount > 500", tools=("crm__refund",))
    rules = policy(big, rule("never", DENY, tools=("crm__refund",), subjects=("alice",)))
    assert rules.decide(BOB, REFUND).allowed and rules.decide(BOB, REFUND).conditional
    assert not rules.decide(BOB, REFUND, {"amount": 900}).allowed
    assert not rules.decide(BOB, REFUND, {"amount": "x"}).allowed  # an error: the deny applies
    assert rules.decide(BOB, REFUND, {"amount": 9}).allowed
    assert not rules.decide(ALICE, REFUND).allowed  # a later unconditional deny still hides it


def test_a_rule_message_is_what_the_refused_caller_is_told() -> None:
    limit = Rule(name="limit", where="x", tools=("crm__refund",), when=Condition.compile(
        "request.arguments.amount <= 500"), message="Refunds above 500 need a manager.")
    refused = policy(limit, default=DENY).decide(BOB, REFUND, {"amount": 900})
    assert refused.refusal() == "Refunds above 500 need a manager."


def test_callers_with_the_same_outcomes_share_one_class() -> None:
    rules = policy(*(rule(f"team-{i}", groups=(f"team-{i}",)) for i in range(5)),
                   rule("alice", subjects=("alice",)))
    users = [Principal("acme", f"user-{n}", groups=frozenset({f"team-{n % 5}"})) for n in range(10_000)]
    classes = {id(rules.access(user)) for user in users}
    assert len(classes) == 5
    assert rules.access(ALICE) is not rules.access(users[0])


def test_a_principal_remembers_its_class_for_one_policy() -> None:
    one, other = policy(rule("a", subjects=("alice",))), policy()
    assert one.access(ALICE) is one.access(ALICE)
    assert other.access(ALICE) is not one.access(ALICE)
    assert one.access(ALICE).key == ((0, False),)


@pytest.mark.parametrize("groups", [("billing-leads",), ("BILLING-LEADS",)])
def test_globs_are_case_sensitive(groups: tuple[str, ...]) -> None:
    rules = policy(rule("leads", groups=groups), default=DENY)
    assert rules.decide(BOB, REFUND).allowed is (groups == ("billing-leads",))
