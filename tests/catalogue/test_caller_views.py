"""Views per policy class: what each caller is listed is exactly what it may call (property-tested over
random principals, rules and catalogues for tools, prompts, resources and templates), with argument
limits shown in the listed schema and enforced on the call."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.catalogue.listings import PROMPTS, RESOURCES, TEMPLATES, Listed
from gateway.catalogue.merge import BackendSnapshot, Catalogue, Tool, merge, snapshot_version
from gateway.catalogue.views import TenantView, ViewCache
from gateway.config import TenantConfig
from gateway.policy import ALLOW, DENY, Callers, Item, Principal, Rule, TenantPolicy
from gateway.protocol.errors import InvalidParams

BACKENDS = ("crm", "git")
NAMES = ("read_a", "read_b", "refund", "push")
SCHEMA = {"type": "object", "properties": {"amount": {"type": "number", "maximum": 1000}}}


Named = dict[str, list[str]]


def catalogue(tools: Named, prompts: Named | None = None, resources: Named | None = None,
              templates: Named | None = None) -> Catalogue:
    snapshots = {}
    for backend in BACKENDS:
        raw = [{"name": name, "inputSchema": SCHEMA} for name in tools.get(backend, [])]
        lists = {kind.name: tuple(Listed.from_dict(kind, {"name": "n", kind.key: key})  # type: ignore[misc]
                                  for key in (found or {}).get(backend, []))
                 for kind, found in ((PROMPTS, prompts), (RESOURCES, resources), (TEMPLATES, templates))}
        version = snapshot_version([*raw, {k: [i.key for i in v] for k, v in lists.items()}])
        snapshots[backend] = BackendSnapshot(backend, tuple(map(Tool.from_dict, raw)), version,
                                             0.0, lists=lists, offers=frozenset({"prompts", "resources"}))
    return merge([(b, b) for b in BACKENDS], snapshots, "__")


def tenant(*rules: Rule, default: str = ALLOW) -> TenantConfig:
    return TenantConfig(name="acme", backends=("*",), rules=rules, default=default,
                        policy=TenantPolicy(rules, default))


def listed_tools(view: TenantView) -> list[dict[str, Any]]:
    return orjson.loads(orjson.dumps(view.page(None)))["tools"]  # type: ignore[no-any-return]


def callable_tool(view: TenantView, name: str, principal: Principal) -> bool:
    try:
        entry = view.lookup(name)
    except InvalidParams:
        return False
    return view.tool_refusal(entry, {}, principal) is None


# ---------------------------------------------------------------- strategies

globs = st.lists(st.sampled_from(["*", "crm__*", "git__*", "*read*", "crm__refund", "nope", "*+*", "crm+*"]),
                 max_size=2).map(tuple)
optional_globs = st.none() | globs
caller_globs = st.none() | st.lists(st.sampled_from(["*", "alice", "bob", "leads", "sup*", "crm:*"]),
                                    max_size=2).map(tuple)
rule_strategy = st.builds(
    lambda i, effect, subjects, groups, scopes, tools, prompts, resources, backends: Rule(
        name=f"r{i}", where=f"rules[{i}]", effect=effect, callers=Callers(subjects, groups, scopes),
        tools=tools, prompts=prompts, resources=resources, backends=backends),
    st.integers(0, 10**6), st.sampled_from([ALLOW, DENY]), caller_globs, caller_globs, caller_globs,
    optional_globs, optional_globs, optional_globs,
    st.none() | st.lists(st.sampled_from(BACKENDS), max_size=2).map(tuple))
principals = st.builds(lambda subject, groups, scopes: Principal("acme", subject, frozenset(scopes),
                                                                 groups=frozenset(groups)),
                       st.sampled_from(["alice", "bob", "carol"]),
                       st.lists(st.sampled_from(["leads", "support", "bots"]), max_size=2),
                       st.lists(st.sampled_from(["crm:read", "git:push"]), max_size=2))
per_backend = st.fixed_dictionaries({b: st.lists(st.sampled_from(NAMES), max_size=4, unique=True) for b in BACKENDS})
uris = st.fixed_dictionaries({b: st.lists(st.sampled_from(["doc://a", "doc://b", "file:///x"]), max_size=3,
                                          unique=True) for b in BACKENDS})
templated = st.fixed_dictionaries({b: st.lists(st.sampled_from(["doc://{id}", "file:///{path}"]), max_size=2,
                                               unique=True) for b in BACKENDS})


def unique_names(rules: list[Rule]) -> list[Rule]:
    return list({rule.name: rule for rule in rules}.values())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rule_strategy, max_size=6).map(unique_names), st.sampled_from([ALLOW, DENY]), principals,
       per_backend, per_backend, uris, templated)
def test_what_a_caller_is_listed_is_exactly_what_it_may_call(rules: list[Rule], default: str, principal: Principal,
                                                              tools: Named, prompts: Named, resources: Named,
                                                              templates: Named) -> None:
    cat = catalogue(tools, prompts, resources, templates)
    config = tenant(*rules, default=default)
    view = ViewCache(page_size=100).get(cat, config, config.policy.access(principal))
    listed = {tool["name"] for tool in listed_tools(view)}
    for entry in cat.entries:
        decided = config.policy.decide(principal, Item("tools", entry.exposed, entry.backend), {})
        assert (entry.exposed in listed) == callable_tool(view, entry.exposed, principal) == decided.allowed
    for kind in (PROMPTS, TEMPLATES):
        shown = {e.exposed for e in view.listing(kind).entries}
        for entry in cat.listings[kind.name].entries:
            try:
                view.listing(kind).lookup(entry.exposed)
                reachable = True
            except InvalidParams:
                reachable = False
            assert (entry.exposed in shown) == reachable == config.policy.decide(
                principal, Item(kind.name, entry.exposed, entry.backend)).allowed
    shown = {e.exposed for e in view.listing(RESOURCES).entries}
    for entry in cat.listings["resources"].entries:
        readable = view.resolve_uri(entry.exposed) is not None
        assert (entry.exposed in shown) == readable == config.policy.decide(
            principal, Item("resources", entry.exposed, entry.backend)).allowed


# ---------------------------------------------------------------- overlays and conditions

LEADS = Principal("acme", "bob", groups=frozenset({"leads"}))
SUPPORT = Principal("acme", "alice", groups=frozenset({"support"}))
CAT = catalogue({"crm": ["refund", "read_a"]})


def test_an_overlay_tightens_the_listed_schema_of_its_callers_only() -> None:
    config = tenant(Rule(name="leads", where="x", callers=Callers(groups=("leads",)), tools=("crm__refund",),
                         arguments={"amount": {"maximum": 500}, "reason": {"type": "string", "maxLength": 80}}))
    cache = ViewCache(page_size=100)
    leads = {t["name"]: t for t in listed_tools(cache.get(CAT, config, config.policy.access(LEADS)))}
    support = {t["name"]: t for t in listed_tools(cache.get(CAT, config, config.policy.access(SUPPORT)))}
    assert leads["crm__refund"]["inputSchema"]["properties"] == {
        "amount": {"type": "number", "maximum": 500}, "reason": {"type": "string", "maxLength": 80}}
    assert support["crm__refund"]["inputSchema"] == SCHEMA
    assert leads["crm__read_a"]["inputSchema"] == SCHEMA


def test_a_call_past_the_overlay_is_refused_naming_the_limit() -> None:
    config = tenant(Rule(name="leads", where="x", tools=("crm__refund",), arguments={"amount": {"maximum": 500}}))
    view = ViewCache(page_size=100).get(CAT, config, config.policy.access(LEADS))
    entry = view.lookup("crm__refund")
    assert view.tool_refusal(entry, {"amount": 500}, LEADS) is None
    refusal = view.tool_refusal(entry, {"amount": 501}, LEADS)
    assert refusal is not None and refusal.reason == "arguments"
    assert refusal.message == ("Invalid arguments for tool crm__refund: "
                               "501 is greater than the maximum of 500 (at amount)")


def test_a_condition_on_arguments_is_decided_per_call() -> None:
    from gateway.policy import Condition

    config = tenant(Rule(name="small", where="x", tools=("crm__refund",),
                         when=Condition.compile("request.arguments.amount <= 500")), default=DENY)
    view = ViewCache(page_size=100).get(CAT, config, config.policy.access(LEADS))
    assert [t["name"] for t in listed_tools(view)] == ["crm__refund"]
    entry = view.lookup("crm__refund")
    assert view.tool_refusal(entry, {"amount": 20}, LEADS) is None
    refusal = view.tool_refusal(entry, {"amount": 900}, LEADS)
    assert refusal is not None and (refusal.reason, refusal.decision.rule_name) == ("condition", "default")


def test_ten_thousand_users_in_five_groups_share_five_views() -> None:
    config = tenant(*(Rule(name=f"g{i}", where="x", callers=Callers(groups=(f"g{i}",)), tools=(f"crm__read_{i}",),
                           effect=DENY) for i in range(5)))
    cache = ViewCache(page_size=100)
    users = [Principal("acme", f"u{n}", groups=frozenset({f"g{n % 5}"})) for n in range(10_000)]
    views = {id(cache.get(CAT, config, config.policy.access(user))) for user in users}
    assert len(views) == 5
