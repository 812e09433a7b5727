"""check-config's word on rules: those an earlier rule always pre-empts, and globs that match no name."""

from __future__ import annotations

from gateway.policy import ALLOW, DENY, Callers, Condition, Rule
from gateway.policy.lint import shadowed, unmatched_globs


def rule(name: str, effect: str = ALLOW, **keys: object) -> Rule:
    return Rule(name=name, where=f"rules[{name}]", effect=effect, **keys)  # type: ignore[arg-type]


def pairs(*rules: Rule) -> list[tuple[str, str]]:
    return [(later.name, earlier.name) for later, earlier in shadowed(rules)]


def test_a_rule_inside_an_earlier_one_is_shadowed() -> None:
    assert pairs(rule("crm", DENY, tools=("crm__*",)), rule("refund", tools=("crm__refund",),
                                                             callers=Callers(groups=("leads",)))) == [("refund", "crm")]
    assert pairs(rule("everything", DENY), rule("any", tools=("x__y",), backends=("x",))) == [("any", "everything")]


def test_a_narrower_or_conditional_earlier_rule_shadows_nothing() -> None:
    assert pairs(rule("leads", callers=Callers(groups=("leads",)), tools=("crm__*",)), rule("all", tools=("crm__*",))) \
        == []
    assert pairs(rule("cond", when=Condition.compile("'x' in principal.groups")), rule("later")) == []
    assert pairs(rule("read", tools=("crm__read_*",)), rule("refund", tools=("crm__refund",))) == []
    assert pairs(rule("q", tools=("crm__?",)), rule("ab", tools=("crm__ab",))) == []  # only `*` is reasoned about
    assert pairs(rule("tools", tools=("*",)), rule("prompts", prompts=("*",))) == []


def test_globs_that_fit_no_namespace_are_found() -> None:
    namespaces = {"crm": "crm", "git": "git"}
    typo = rule("typo", tools=("cmr__*", "crm__*", "*__push"), resources=("files+*", "crm+orders://*"))
    assert list(unmatched_globs(typo, namespaces, "__")) == [("rules[typo].tools[0]", "cmr__*"),
                                                            ("rules[typo].resources[0]", "files+*")]
    narrowed = rule("narrowed", tools=("git__*",), backends=("crm",))
    assert list(unmatched_globs(narrowed, namespaces, "__")) == [("rules[narrowed].tools[0]", "git__*")]
    assert list(unmatched_globs(typo, {"clock": ""}, "__")) == []  # unprefixed names can be anything
