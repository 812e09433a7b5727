"""gateway.catalogue.listviews: a tenant's prompts, resources and templates, and where a URI is read."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.catalogue.listings import KINDS, PROMPTS, RESOURCES, TEMPLATES, Listed
from gateway.catalogue.listviews import Route
from gateway.catalogue.merge import BackendSnapshot, Catalogue, merge
from gateway.catalogue.views import TenantView, ViewCache
from gateway.config import TenantConfig
from gateway.protocol import spec
from gateway.protocol.errors import InvalidParams

ORDER = [("notes", "notes"), ("files", ""), ("calc", "calc")]


def items(kind: Any, *keys: str) -> tuple[Listed, ...]:
    return tuple(Listed.from_dict(kind, {"name": "n", kind.key: k}) for k in keys)  # type: ignore[misc]


def snapshot(backend: str, *, prompts: tuple[str, ...] = (), resources: tuple[str, ...] = (),
             templates: tuple[str, ...] = (), offers: tuple[str, ...] = ("prompts", "resources")) -> BackendSnapshot:
    lists = {"prompts": items(PROMPTS, *prompts), "resources": items(RESOURCES, *resources),
             "templates": items(TEMPLATES, *templates)}
    return BackendSnapshot(backend, (), f"{backend}{prompts}{resources}{templates}", 0.0,
                           lists={k: v for k, v in lists.items() if v}, offers=frozenset(offers))


def world(**changes: BackendSnapshot) -> Catalogue:
    snapshots = {
        "notes": snapshot("notes", prompts=("summarize", "draft"), resources=("notes://index",),
                          templates=("notes://note/{id}",)),
        "files": snapshot("files", resources=("file:///etc/motd",), templates=("file:///home/{user}/{+path}",)),
        "calc": snapshot("calc", prompts=("explain",), offers=("prompts",)),
        **changes,
    }
    return merge(ORDER, snapshots, "__")


def tenant(name: str = "acme", **rules: tuple[str, ...]) -> TenantConfig:
    return TenantConfig(name=name, **{"backends": ("*",), **rules})  # type: ignore[arg-type]


def view(t: TenantConfig | None = None, catalogue: Catalogue | None = None, page_size: int = 100) -> TenantView:
    return TenantView(catalogue or world(), t or tenant(), page_size=page_size)


def keys(v: TenantView, kind: Any) -> list[str]:
    return [e.exposed for e in v.listing(kind).entries]


def decode(page: orjson.Fragment) -> Any:
    return orjson.loads(orjson.dumps(page))


def test_every_kind_is_listed_under_its_exposed_keys() -> None:
    v = view()
    assert keys(v, PROMPTS) == ["notes__summarize", "notes__draft", "calc__explain"]
    assert keys(v, RESOURCES) == ["notes+notes://index", "file:///etc/motd"]
    assert keys(v, TEMPLATES) == ["notes+notes://note/{id}", "file:///home/{user}/{+path}"]
    assert decode(v.listing(TEMPLATES).page(None)) == {"resourceTemplates": [
        {"uriTemplate": "notes+notes://note/{id}", "name": "n"}, {"uriTemplate": "file:///home/{user}/{+path}",
                                                                 "name": "n"}]}


def test_globs_and_backends_filter_each_kind() -> None:
    v = view(tenant(backends=("notes", "files"), prompts_deny=("*draft",), resources_allow=("notes+*",)))
    assert keys(v, PROMPTS) == ["notes__summarize"]
    assert keys(v, RESOURCES) == ["notes+notes://index"]
    assert keys(v, TEMPLATES) == ["notes+notes://note/{id}"]


def test_pages_link_with_cursors_of_their_own_view_and_kind() -> None:
    v = view(page_size=1)
    listing = v.listing(PROMPTS)
    first = decode(listing.page(None))
    assert first["prompts"][0]["name"] == "notes__summarize"
    second = decode(listing.page(first["nextCursor"]))
    assert second["prompts"][0]["name"] == "notes__draft"
    with pytest.raises(InvalidParams, match="Invalid cursor"):
        v.listing(RESOURCES).page(first["nextCursor"])
    with pytest.raises(InvalidParams, match="Invalid cursor"):
        view(tenant("other"), page_size=1).listing(PROMPTS).page(first["nextCursor"])


@pytest.mark.parametrize("name", ["notes__nope", "summarize", "", None, 5])
def test_an_unknown_prompt_is_refused(name: Any) -> None:
    with pytest.raises(InvalidParams, match="Unknown prompt"):
        view().listing(PROMPTS).lookup(name)


def test_an_invisible_prompt_looks_like_an_unknown_one() -> None:
    with pytest.raises(InvalidParams) as hidden:
        view(tenant(prompts_deny=("*",))).listing(PROMPTS).lookup("notes__summarize")
    assert hidden.value.message == "Unknown prompt: notes__summarize"


@pytest.mark.parametrize(("uri", "route"), [
    ("notes+notes://index", Route("notes", "notes://index")),  # listed
    ("notes+notes://note/7", Route("notes", "notes://note/7")),  # by its namespace
    ("notes+anything:at/all", Route("notes", "anything:at/all")),  # the backend decides what exists
    ("file:///etc/motd", Route("files", "file:///etc/motd")),  # listed, unprefixed
    ("file:///home/ann/docs/a.txt", Route("files", "file:///home/ann/docs/a.txt")),  # an unprefixed template
    ("file:///var/log/syslog", None),  # unprefixed and neither listed nor templated
    ("file:///home/ann/" + "x" * 3000, None),  # too long to match against templates
    ("calc+calc://x", None),  # calc declared no resources
    ("nobody+x://1", None),
    ("+x://1", None),
])
def test_a_uri_routes_to_its_owner_with_the_backends_own_uri(uri: str, route: Route | None) -> None:
    assert view().resolve_uri(uri) == route


def test_the_tenants_policy_has_the_last_word_on_a_uri() -> None:
    v = view(tenant(backends=("files",), resources_deny=("file:///home/*/secret*",)))
    assert v.resolve_uri("notes+notes://index") is None
    assert v.resolve_uri("file:///home/ann/secret.txt") is None
    assert v.resolve_uri("file:///home/ann/public.txt") == Route("files", "file:///home/ann/public.txt")


def test_offers_name_what_the_tenants_backends_declared() -> None:
    assert view().offers("prompts") and view().offers("resources") and not view().offers("completions")
    assert not view(tenant(backends=("calc",))).offers("resources")


def test_changes_name_the_tenants_whose_view_of_each_kind_differs() -> None:
    old = world()
    new = world(files=snapshot("files", resources=("file:///etc/motd", "file:///etc/issue"),
                               templates=("file:///home/{user}/{+path}",)))
    notes_only = tenant("notes-only", backends=("notes",))
    everyone = tenant("everyone")
    changes = ViewCache(page_size=10).changes(old, new, [notes_only, everyone])
    assert {method: audience.tenants for method, audience in changes.items()} == {
        spec.RESOURCES_LIST_CHANGED: {"everyone"}}


def test_a_changed_prompt_is_a_prompts_change_only() -> None:
    new = world(calc=snapshot("calc", prompts=("explain", "derive"), offers=("prompts",)))
    changes = ViewCache(page_size=10).changes(world(), new, [tenant("a"), tenant("b", prompts_deny=("calc__*",))])
    assert {method: audience.tenants for method, audience in changes.items()} == {spec.PROMPTS_LIST_CHANGED: {"a"}}


def test_every_kind_has_its_list_method_and_notification() -> None:
    assert {(k.list_method, k.list_changed) for k in KINDS} == {
        (spec.PROMPTS_LIST, spec.PROMPTS_LIST_CHANGED), (spec.RESOURCES_LIST, spec.RESOURCES_LIST_CHANGED),
        (spec.RESOURCES_TEMPLATES_LIST, spec.RESOURCES_LIST_CHANGED)}


def test_globs_that_hide_every_prompt_or_resource_take_the_capability_away() -> None:
    everything = world(calc=snapshot("calc", prompts=("explain",), offers=("prompts", "completions")))
    no_prompts = tenant(prompts_deny=("*",))
    assert not view(no_prompts, everything).offers("prompts") and view(no_prompts, everything).offers("resources")
    no_resources = tenant(resources_allow=("nothing+*",))
    assert view(no_resources, everything).offers("prompts") and not view(no_resources, everything).offers("resources")
    some_left = tenant(prompts_allow=("calc__*",), resources_deny=("notes+*", "file:*"))
    assert view(some_left, everything).offers("prompts") and not view(some_left, everything).offers("resources")
    assert view(some_left, everything).offers("completions")
    hidden = tenant(prompts_deny=("*",), resources_deny=("*",))
    assert not any(view(hidden, everything).offers(c) for c in ("prompts", "resources", "completions"))
    # without globs, a declared capability stays while its backends list nothing yet (listChanged brings them)
    empty = world(notes=snapshot("notes"), files=snapshot("files"), calc=snapshot("calc", offers=("prompts",)))
    assert view(catalogue=empty).offers("prompts") and view(catalogue=empty).offers("resources")
