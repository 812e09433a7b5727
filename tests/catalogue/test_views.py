"""gateway.catalogue.views: tenant filtering, pre-encoded pages, opaque cursors, argument checks."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from gateway.catalogue.merge import BackendSnapshot, Catalogue, Tool, merge, snapshot_version
from gateway.catalogue.views import TenantView, ViewCache, visible
from gateway.config import TenantConfig
from gateway.protocol.errors import InvalidParams

JsonObject = dict[str, Any]
ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "opts": {"type": "object",
                   "properties": {"mode": {"enum": ["fast", "exact"]}}}},
    "required": ["a", "b"],
}


def tool(name: str, **fields: Any) -> JsonObject:
    return {"name": name, "inputSchema": {"type": "object"}, **fields}


def catalogue(tools: dict[str, list[JsonObject]]) -> Catalogue:
    snapshots = {b: BackendSnapshot(b, tuple(map(Tool.from_dict, t)), snapshot_version(t), 0.0)
                 for b, t in tools.items()}
    return merge([(b, b) for b in tools], snapshots, "__")


def tenant(name: str = "acme", *, backends: tuple[str, ...] = ("*",), allow: tuple[str, ...] = ("*",),
           deny: tuple[str, ...] = ()) -> TenantConfig:
    return TenantConfig(name=name, backends=backends, tools_allow=allow, tools_deny=deny)


def decode(page: orjson.Fragment) -> JsonObject:
    return orjson.loads(orjson.dumps(page))


def names(view: TenantView) -> list[str]:
    return [e.exposed for e in view.entries]


def cursor(payload: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(payload)).decode().rstrip("=")


CAT = catalogue({
    "search": [tool("query"), tool("delete_all"), tool("delete_one")],
    "clock": [tool("now"), tool("sleep")],
})


def many(count: int) -> Catalogue:
    return catalogue({"s": [tool(f"t{i:03}") for i in range(count)]})


def walk(view: TenantView) -> list[list[str]]:
    """Every page's tool names, following nextCursor from the first page to the last."""
    pages, result = [], decode(view.page(None))
    while True:
        pages.append([t["name"] for t in result["tools"]])
        if "nextCursor" not in result:
            return pages
        result = decode(view.page(result["nextCursor"]))


# ---------------------------------------------------------------- filtering


def test_a_tenant_with_all_backends_sees_every_tool() -> None:
    view = TenantView(CAT, tenant(), page_size=10)
    assert names(view) == ["search__query", "search__delete_all", "search__delete_one", "clock__now", "clock__sleep"]


def test_a_tenant_sees_only_its_backends() -> None:
    assert names(TenantView(CAT, tenant(backends=("clock",)), page_size=10)) == ["clock__now", "clock__sleep"]


def test_a_tenant_with_no_backends_sees_nothing() -> None:
    assert names(TenantView(CAT, tenant(backends=()), page_size=10)) == []


def test_deny_globs_hide_matching_exposed_names() -> None:
    view = TenantView(CAT, tenant(deny=("search__delete_*",)), page_size=10)
    assert names(view) == ["search__query", "clock__now", "clock__sleep"]


def test_allow_globs_keep_only_matching_exposed_names() -> None:
    assert names(TenantView(CAT, tenant(allow=("clock__*", "search__query")), page_size=10)) == [
        "search__query", "clock__now", "clock__sleep",
    ]


def test_deny_wins_over_allow() -> None:
    assert names(TenantView(CAT, tenant(allow=("clock__now",), deny=("clock__*",)), page_size=10)) == []


def test_globs_are_case_sensitive() -> None:
    assert names(TenantView(CAT, tenant(allow=("CLOCK__*",)), page_size=10)) == []


def test_globs_match_exposed_names_not_original_ones() -> None:
    assert names(TenantView(CAT, tenant(allow=("now",)), page_size=10)) == []


def test_the_backend_filter_and_the_globs_both_apply() -> None:
    view = TenantView(CAT, tenant(backends=("search",), allow=("*now", "*query")), page_size=10)
    assert names(view) == ["search__query"]


def test_visible_applies_the_policy_to_one_entry() -> None:
    entry = CAT.by_name["search__delete_all"]
    assert (visible(entry, tenant()), visible(entry, tenant(deny=("*delete*",))),
            visible(entry, tenant(backends=("clock",)))) == (True, False, False)


# ---------------------------------------------------------------- lookup


def test_lookup_returns_a_visible_entry() -> None:
    assert TenantView(CAT, tenant(), page_size=10).lookup("clock__now") is CAT.by_name["clock__now"]


def test_an_unknown_tool_is_invalid_params() -> None:
    with pytest.raises(InvalidParams) as info:
        TenantView(CAT, tenant(), page_size=10).lookup("clock__nope")
    assert (info.value.code, info.value.message, info.value.data) == (-32602, "Unknown tool: clock__nope", None)


@pytest.mark.parametrize("policy", [{"backends": ("clock",)}, {"deny": ("search__*",)}, {"allow": ("clock__*",)}])
def test_an_invisible_tool_looks_exactly_like_a_nonexistent_one(policy: dict[str, Any]) -> None:
    view = TenantView(CAT, tenant(**policy), page_size=10)
    errors = []
    for name in ("search__query", "search__querx"):
        with pytest.raises(InvalidParams) as info:
            view.lookup(name)
        errors.append((type(info.value), info.value.code, info.value.message, info.value.data))
    assert errors[0] == (InvalidParams, -32602, "Unknown tool: search__query", None)
    assert errors[1] == (InvalidParams, -32602, "Unknown tool: search__querx", None)


@pytest.mark.parametrize(("name", "shown"), [(None, "None"), (5, "5"), (["clock__now"], "['clock__now']")])
def test_a_non_string_name_is_unknown(name: Any, shown: str) -> None:
    with pytest.raises(InvalidParams) as info:
        TenantView(CAT, tenant(), page_size=10).lookup(name)
    assert info.value.message == f"Unknown tool: {shown}"


def test_a_long_unknown_name_is_cut_in_the_message() -> None:
    with pytest.raises(InvalidParams) as info:
        TenantView(CAT, tenant(), page_size=10).lookup("x" * 1000)
    assert info.value.message == "Unknown tool: " + "x" * 200


# ---------------------------------------------------------------- pages


def test_pages_are_fragments_joined_from_the_bytes_every_view_shares() -> None:
    """Views differing by one tool hold references to the catalogue's encoded tools, not copies."""
    catalogue = many(3)
    view = TenantView(catalogue, tenant(), page_size=2)
    other = TenantView(catalogue, tenant(deny=("s__t002",)), page_size=2)
    assert all(isinstance(p, orjson.Fragment) for p in view.pages)
    assert (len(view.pages), len(other.pages), len(view.pages[0:5])) == (2, 1, 2)
    assert view.listed()[0] is other.listed()[0] is catalogue.entries[0].json()
    assert orjson.dumps(view.page(None)) == orjson.dumps(view.pages[-2])  # the first page, however got
    with pytest.raises(IndexError):
        view.pages[2]


def test_a_page_carries_the_tools_unchanged() -> None:
    cat = catalogue({"s": [tool("a", description="d", annotations={"readOnlyHint": True})]})
    assert decode(TenantView(cat, tenant(), page_size=5).page(None)) == {
        "tools": [{"name": "s__a", "inputSchema": {"type": "object"}, "description": "d",
                   "annotations": {"readOnlyHint": True}}],
    }


def test_a_page_is_exactly_what_encoding_its_tools_gives() -> None:
    view = TenantView(many(3), tenant(), page_size=2)
    raw = orjson.dumps(view.page(None))
    tools = [e.decoded() for e in view.entries[:2]]
    assert raw == orjson.dumps({"tools": tools, "nextCursor": first_cursor(view)})
    assert orjson.dumps(view.pages[1]) == orjson.dumps({"tools": [view.entries[2].decoded()]})


def test_a_tenant_seeing_every_tool_shares_the_catalogues_index() -> None:
    everything = TenantView(CAT, tenant(), page_size=10)
    some = TenantView(CAT, tenant(deny=("clock__*",)), page_size=10)
    assert everything.entries is CAT.entries and everything.by_name is CAT.by_name
    assert some.by_name is not CAT.by_name
    assert set(some.by_name) == {"search__query", "search__delete_all", "search__delete_one"}


def test_an_empty_view_has_one_empty_page() -> None:
    view = TenantView(CAT, tenant(backends=()), page_size=10)
    assert decode(view.page(None)) == {"tools": []}


def test_a_single_page_has_no_next_cursor() -> None:
    assert "nextCursor" not in decode(TenantView(many(10), tenant(), page_size=10).page(None))


def test_the_cursor_chain_covers_every_tool_exactly_once_in_order() -> None:
    view = TenantView(many(25), tenant(), page_size=10)
    pages = walk(view)
    assert [len(p) for p in pages] == [10, 10, 5]
    assert [name for page in pages for name in page] == [f"s__t{i:03}" for i in range(25)]


def test_an_exact_multiple_of_the_page_size_ends_without_an_empty_page() -> None:
    assert [len(p) for p in walk(TenantView(many(20), tenant(), page_size=10))] == [10, 10]


def test_a_page_size_of_one_still_covers_every_tool() -> None:
    assert walk(TenantView(many(3), tenant(), page_size=1)) == [["s__t000"], ["s__t001"], ["s__t002"]]


def test_the_chain_covers_only_the_visible_tools() -> None:
    view = TenantView(CAT, tenant(deny=("search__delete_*",)), page_size=2)
    assert walk(view) == [["search__query", "clock__now"], ["clock__sleep"]]


# ---------------------------------------------------------------- bad cursors


def first_cursor(view: TenantView) -> str:
    return decode(view.page(None))["nextCursor"]


def assert_invalid_cursor(view: TenantView, value: Any) -> None:
    with pytest.raises(InvalidParams) as info:
        view.page(value)
    assert (info.value.code, info.value.message) == (-32602, "Invalid cursor")


@pytest.mark.parametrize("value", [
    "", "garbage", "!!!!", "%%%%", "é", "eyJ", 5, 0, True, ["x"], {"v": "x", "o": 10}, "A" * 201,
    cursor([1, 2]), cursor("text"), cursor({"o": 10}), cursor({"v": "x"}),
])
def test_a_garbage_cursor_is_invalid_params(value: Any) -> None:
    assert_invalid_cursor(TenantView(many(25), tenant(), page_size=10), value)


def test_a_forged_cursor_with_a_made_up_view_is_refused() -> None:
    assert_invalid_cursor(TenantView(many(25), tenant(), page_size=10), cursor({"v": "0" * 16, "o": 10}))


@pytest.mark.parametrize("offset", [0, 5, 11, -10, 30, 10**6, True, 10.0, "10", None])
def test_a_forged_offset_on_the_right_view_is_refused(offset: Any) -> None:
    view = TenantView(many(25), tenant(), page_size=10)
    assert_invalid_cursor(view, cursor({"v": view.id, "o": offset}))


def test_a_well_formed_cursor_for_this_view_is_accepted() -> None:
    view = TenantView(many(25), tenant(), page_size=10)
    assert orjson.dumps(view.page(cursor({"v": view.id, "o": 20}))) == orjson.dumps(view.pages[2])


def test_a_cursor_from_another_tenant_is_refused() -> None:
    other = TenantView(many(25), tenant("globex"), page_size=10)
    assert_invalid_cursor(TenantView(many(25), tenant("acme"), page_size=10), first_cursor(other))


def test_a_cursor_from_another_catalogue_version_is_refused() -> None:
    old = TenantView(many(25), tenant(), page_size=10)
    new = TenantView(many(26), tenant(), page_size=10)
    assert old.catalogue_version != new.catalogue_version
    assert_invalid_cursor(new, first_cursor(old))


def test_a_cursor_from_a_different_policy_of_the_same_tenant_is_refused() -> None:
    old = TenantView(many(25), tenant(), page_size=10)
    assert_invalid_cursor(TenantView(many(25), tenant(deny=("s__t000",)), page_size=10), first_cursor(old))


def test_a_cursor_stays_valid_for_an_equal_view() -> None:
    first, again = TenantView(many(25), tenant(), page_size=10), TenantView(many(25), tenant(), page_size=10)
    assert decode(again.page(first_cursor(first)))["tools"][0]["name"] == "s__t010"


# ---------------------------------------------------------------- validate_arguments


def add_view(schema: Any = ADD_SCHEMA) -> tuple[TenantView, Any]:
    view = TenantView(catalogue({"calc": [tool("add", inputSchema=schema)]}), tenant(), page_size=10)
    return view, view.lookup("calc__add")


def test_good_arguments_give_none() -> None:
    view, entry = add_view()
    assert view.validate_arguments(entry, {"a": 1, "b": 2, "opts": {"mode": "fast"}}) is None


def test_a_missing_argument_is_reported() -> None:
    view, entry = add_view()
    assert view.validate_arguments(entry, {"a": 1}) == (
        "Invalid arguments for tool calc__add: 'b' is a required property"
    )


def test_a_wrong_type_is_reported_with_its_location() -> None:
    view, entry = add_view()
    assert view.validate_arguments(entry, {"a": "1", "b": 2}) == (
        "Invalid arguments for tool calc__add: '1' is not of type 'integer' (at a)"
    )


def test_a_nested_violation_is_reported_with_its_path() -> None:
    view, entry = add_view()
    assert view.validate_arguments(entry, {"a": 1, "b": 2, "opts": {"mode": "slow"}}) == (
        "Invalid arguments for tool calc__add: 'slow' is not one of ['fast', 'exact'] (at opts/mode)"
    )


def test_the_validator_is_compiled_once_per_tool() -> None:
    view, entry = add_view()
    view.validate_arguments(entry, {"a": 1})
    compiled = view._validators["calc__add"]
    view.validate_arguments(entry, {"a": 1, "b": 1})
    assert view._validators == {"calc__add": compiled}


@pytest.mark.parametrize("schema", [None, "object", [1], {"type": "nonsense"}, {"required": "a"},
                                    {"properties": {"a": {"type": 5}}}])
def test_a_missing_or_broken_schema_accepts_any_arguments(schema: Any) -> None:
    view, entry = add_view(schema)
    assert view.validate_arguments(entry, {"anything": [1]}) is None


@pytest.mark.parametrize("ref", ["#/nowhere", "http://schemas.invalid/x.json"])
def test_a_schema_with_an_unresolvable_ref_accepts_any_arguments(ref: str) -> None:
    view, entry = add_view({"type": "object", "properties": {"a": {"$ref": ref}}})
    assert view.validate_arguments(entry, {"a": 1}) is None


def test_an_older_draft_schema_is_honoured() -> None:
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "properties": {"n": {"type": "number", "exclusiveMaximum": 5}}}
    view, entry = add_view(schema)
    assert view.validate_arguments(entry, {"n": 5}) == (
        "Invalid arguments for tool calc__add: 5 is greater than or equal to the maximum of 5 (at n)"
    )


# ---------------------------------------------------------------- ViewCache


def test_the_cache_returns_the_same_view_for_the_same_version_and_tenant() -> None:
    cache = ViewCache(page_size=10)
    acme = tenant("acme")
    view = cache.get(CAT, acme)
    assert cache.get(CAT, acme) is view
    assert view.page_size == 10
    assert cache.get(CAT, tenant("globex")) is not view


def test_the_cache_drops_every_view_when_the_version_changes() -> None:
    cache = ViewCache(page_size=10)
    acme, globex = tenant("acme"), tenant("globex")
    old_acme, old_globex = cache.get(many(3), acme), cache.get(many(3), globex)
    new_acme = cache.get(many(4), acme)
    assert new_acme is not old_acme
    assert names(new_acme) == ["s__t000", "s__t001", "s__t002", "s__t003"]
    assert cache.get(many(3), globex) is not old_globex


def test_tenants_changed_names_only_tenants_whose_visible_tools_differ() -> None:
    old = CAT
    new = catalogue({
        "search": [tool("query", description="v2"), tool("delete_all"), tool("delete_one")],
        "clock": [tool("now"), tool("sleep")],
    })
    tenants = [tenant("acme"), tenant("clocks", backends=("clock",)), tenant("queries", allow=("search__query",)),
               tenant("deleters", allow=("search__delete_*",))]
    assert ViewCache(page_size=10).tenants_changed(old, new, tenants) == ["acme", "queries"]


def test_tenants_changed_sees_added_and_removed_tools() -> None:
    new = catalogue({"search": [tool("query"), tool("delete_all")], "clock": [tool("now"), tool("sleep"),
                                                                             tool("tick")]})
    tenants = [tenant("acme"), tenant("clocks", backends=("clock",)), tenant("deleters", allow=("*delete_all",))]
    assert ViewCache(page_size=10).tenants_changed(CAT, new, tenants) == ["acme", "clocks"]


def test_tenants_changed_is_empty_for_identical_catalogues() -> None:
    assert ViewCache(page_size=10).tenants_changed(CAT, CAT, [tenant("acme")]) == []
