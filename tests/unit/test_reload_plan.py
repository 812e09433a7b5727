"""gateway.reload's pure parts and the tenant-view diff it announces: what a new config changes."""

from __future__ import annotations

from dataclasses import replace

from gateway.catalogue.merge import BackendSnapshot, Catalogue, Tool, merge, snapshot_version
from gateway.catalogue.views import ViewCache, policy_changes
from gateway.config import AuthConfig, Config, SearchConfig, ServerConfig, StdioBackend, TenantConfig, TenantLimits
from gateway.protocol import spec
from gateway.reload import BackendPlan, changed_keys, changed_tenants, restart_only_changes
from gateway.shared_state import session_limits


def stdio(name: str, **extra: object) -> StdioBackend:
    return StdioBackend(name=name, namespace=name, command=("python", "-m", name), **extra)  # type: ignore[arg-type]


def test_backends_are_added_removed_replaced_or_kept_by_name_and_config() -> None:
    old = Config(backends=(stdio("a"), stdio("b"), stdio("c")))
    new = Config(backends=(stdio("c"), stdio("b", timeout_seconds=5.0), stdio("d")))
    plan = BackendPlan.between(old, new)
    assert (plan.added, plan.removed, plan.replaced) == (("d",), ("a",), ("b",))
    assert plan.fresh == ("d", "b")
    assert BackendPlan.between(old, old) == BackendPlan((), (), ())


def test_restart_only_changes_name_each_key() -> None:
    old = Config()
    assert restart_only_changes(old, replace(old, tenants={"t": TenantConfig("t")}, backends=(stdio("a"),))) == []
    moved = replace(old, server=ServerConfig(port=9000, max_body_bytes=4096))
    assert restart_only_changes(old, moved) == ["server.port", "server.max_body_bytes"]
    sources = replace(old, auth=AuthConfig(token_sources=("header",), api_keys=()))
    assert restart_only_changes(old, sources) == ["auth.token_sources"]
    keys_only = replace(old, auth=replace(old.auth, anonymous_tenant="guest"))
    assert restart_only_changes(old, keys_only) == []  # live


def test_changed_keys_name_each_key_down_to_a_backends_or_tenants_own_never_a_value() -> None:
    old = Config(backends=(stdio("a"), stdio("b")), tenants={"t": TenantConfig("t"), "gone": TenantConfig("gone")})
    new = replace(old, backends=(stdio("a", timeout_seconds=5.0, env={"TOKEN": "s3cret"}), stdio("c")),
                  tenants={"t": TenantConfig("t", limits=TenantLimits(sessions=3))},
                  catalogue=replace(old.catalogue, refresh_seconds=30.0))
    assert changed_keys(old, new) == ("catalogue.refresh_seconds", "backends.a.timeout_seconds", "backends.a.env",
                                      "backends.b", "backends.c", "tenants.t.limits.sessions", "tenants.gone")
    assert changed_keys(old, old) == ()


def test_changed_tenants_are_the_added_removed_and_different_ones() -> None:
    before = {"a": TenantConfig("a"), "b": TenantConfig("b", backends=("*",)), "c": TenantConfig("c")}
    after = {"a": TenantConfig("a"), "b": TenantConfig("b"), "d": TenantConfig("d")}
    assert changed_tenants(before, after) == ("b", "c", "d")


def catalogue(*tools: str) -> Catalogue:
    listed = [{"name": t, "inputSchema": {"type": "object"}} for t in tools]
    snapshot = BackendSnapshot("calc", tuple(map(Tool.from_dict, listed)), snapshot_version(listed), 0.0)
    return merge([("calc", "calc")], {"calc": snapshot}, "__")


def test_a_policy_change_is_announced_only_to_its_tenant_and_only_when_its_view_differs() -> None:
    world = catalogue("add", "multiply")
    before = {"acme": TenantConfig("acme", backends=("*",)), "globex": TenantConfig("globex", backends=("*",)),
              "initech": TenantConfig("initech", backends=("*",), tools_deny=("nothing*",))}
    after = {**before, "acme": replace(before["acme"], tools_allow=("calc__add",)),
             "initech": replace(before["initech"], tools_deny=("nothing-else*",)), "new": TenantConfig("new")}
    # acme sees less; globex is unchanged (the catalogue listener's business); initech's new policy
    # gives the same view; a new tenant has no client yet.
    changes = policy_changes(world, world, before, after)
    heard = {method for method, audience in changes.items() if audience.admits("acme", None)}
    assert heard == {spec.TOOLS_LIST_CHANGED}
    assert not any(audience.admits(other, None) for audience in changes.values() for other in ("globex", "initech"))


def test_a_new_search_config_is_announced_to_search_mode_tenants_only() -> None:
    world = catalogue("add", "multiply")
    tenants = {"acme": TenantConfig("acme", backends=("*",), discovery="search"),
               "globex": TenantConfig("globex", backends=("*",))}
    fewer = (SearchConfig(), SearchConfig(max_results=8))  # find_tools' limit gets another maximum
    changes = policy_changes(world, world, tenants, tenants, fewer)
    assert [method for method, audience in changes.items() if audience.admits("acme", None)] == \
        [spec.TOOLS_LIST_CHANGED]
    assert not any(audience.admits("globex", None) for audience in changes.values())
    same = (SearchConfig(), SearchConfig(max_bytes=1000))  # nothing a client is listed changes
    assert not any(a.admits("acme", None) for a in policy_changes(world, world, tenants, tenants, same).values())


def test_a_view_built_under_an_old_policy_is_not_served_under_the_new_one() -> None:
    world = catalogue("add", "multiply")
    views = ViewCache(page_size=10)
    old = TenantConfig("acme", backends=("*",))
    new = replace(old, tools_allow=("calc__add",))
    assert len(views.get(world, old).entries) == 2
    assert [e.exposed for e in views.get(world, new).entries] == ["calc__add"]  # same name, same version
    assert views.get(world, new) is views.get(world, new)  # and then cached


def test_session_budgets_follow_the_config_in_force() -> None:
    in_force = [Config(tenants={"acme": TenantConfig("acme", limits=TenantLimits(sessions=5))})]
    limit = session_limits(lambda: in_force[0])
    assert (limit("acme"), limit("new")) == (5, TenantLimits().sessions)
    in_force[0] = Config(tenants={"new": TenantConfig("new", limits=TenantLimits(sessions=2))})  # a reload
    assert (limit("acme"), limit("new")) == (TenantLimits().sessions, 2)
