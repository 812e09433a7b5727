"""gateway.catalogue.merge: order, collisions, renames, hidden tools and a stable version."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import orjson
import pytest

from gateway.catalogue.listings import TASK_CALLS_OFFER
from gateway.catalogue.merge import (
    TASK_TRAIT,
    BackendSnapshot,
    Catalogue,
    Collision,
    Tool,
    ToolEntry,
    VersionHash,
    merge,
    snapshot_version,
)

JsonObject = dict[str, Any]


def tool(name: str, **fields: Any) -> JsonObject:
    return {"name": name, "inputSchema": {"type": "object"}, **fields}


def snap(backend: str, *tools: JsonObject) -> BackendSnapshot:
    return BackendSnapshot(backend, tuple(map(Tool.from_dict, tools)), snapshot_version(tools), fetched_at=0.0)


def build(order: list[tuple[str, str]], *snapshots: BackendSnapshot, separator: str = "__") -> Catalogue:
    return merge(order, {s.backend: s for s in snapshots}, separator)


def names(catalogue: Catalogue) -> list[str]:
    return [e.exposed for e in catalogue.entries]


# ---------------------------------------------------------------- order and names


def test_entries_follow_the_configured_backend_order_then_the_tool_order() -> None:
    catalogue = build([("b", "b"), ("a", "a")], snap("a", tool("x"), tool("y")), snap("b", tool("z"), tool("w")))
    assert names(catalogue) == ["b__z", "b__w", "a__x", "a__y"]


def test_each_entry_knows_its_backend_and_original_name() -> None:
    snapshot = snap("clock", tool("now"))
    catalogue = build([("clock", "time")], snapshot)
    assert catalogue.entries == (ToolEntry("time__now", "clock", snapshot.tools[0]),)
    assert (catalogue.entries[0].original, catalogue.entries[0].tool.name) == ("now", "now")
    assert catalogue.by_name == {"time__now": catalogue.entries[0]}


def test_the_configured_separator_is_used() -> None:
    assert names(build([("a", "a")], snap("a", tool("x")), separator="-")) == ["a-x"]


def test_a_backend_without_a_snapshot_contributes_nothing() -> None:
    catalogue = build([("a", "a"), ("down", "down")], snap("a", tool("x")))
    assert names(catalogue) == ["a__x"]
    assert (catalogue.collisions, catalogue.renamed, catalogue.hidden) == ((), (), ())


def test_a_snapshot_not_in_the_order_is_ignored() -> None:
    assert names(build([("a", "a")], snap("a", tool("x")), snap("ghost", tool("y")))) == ["a__x"]


def test_an_empty_merge_is_an_empty_catalogue() -> None:
    catalogue = merge([], {}, "__")
    assert (catalogue.entries, dict(catalogue.by_name), catalogue.collisions) == ((), {}, ())


# ---------------------------------------------------------------- fields


def test_every_field_but_the_name_is_passed_through_unchanged() -> None:
    original = {
        "name": "search", "title": "Search", "description": "Find things",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        "outputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True},
        "icons": [{"src": "https://x/icon.png"}], "_meta": {"k": [1, 2]},
        "execution": {"taskSupport": "optional"}, "x-extension": None,
    }
    snapshot = snap("s", original)
    entry = build([("s", "s")], snapshot).by_name["s__search"]
    assert entry.decoded() == {**original, "name": "s__search"}
    assert orjson.loads(entry.json()) == {**original, "name": "s__search"}
    assert entry.tool is snapshot.tools[0]  # shared with the snapshot, not copied


def test_the_backend_tool_is_not_modified() -> None:
    snapshot = snap("a", tool("x"))
    build([("a", "a")], snapshot)
    assert snapshot.tools[0].decoded() == {"name": "x", "inputSchema": {"type": "object"}}


# ---------------------------------------------------------------- collisions


def test_on_a_collision_the_first_listed_backend_wins() -> None:
    catalogue = build([("a", ""), ("b", "")], snap("a", tool("search", description="A")),
                      snap("b", tool("search", description="B"), tool("other")))
    assert names(catalogue) == ["search", "other"]
    assert catalogue.by_name["search"].backend == "a"
    assert catalogue.by_name["search"].decoded()["description"] == "A"


def test_the_losing_backend_is_reported() -> None:
    catalogue = build([("a", ""), ("b", "")], snap("a", tool("search")), snap("b", tool("search")))
    assert catalogue.collisions == (Collision(exposed="search", winner="a", loser="b"),)


def test_reversing_the_order_reverses_the_winner() -> None:
    catalogue = build([("b", ""), ("a", "")], snap("a", tool("search")), snap("b", tool("search")))
    assert catalogue.by_name["search"].backend == "b"
    assert catalogue.collisions == (Collision("search", "b", "a"),)


def test_every_losing_backend_is_reported_against_the_winner() -> None:
    catalogue = build([("a", ""), ("b", ""), ("c", "")], *(snap(b, tool("t")) for b in "abc"))
    assert catalogue.collisions == (Collision("t", "a", "b"), Collision("t", "a", "c"))


def test_prefixed_backends_do_not_collide() -> None:
    catalogue = build([("a", "a"), ("b", "b")], snap("a", tool("t")), snap("b", tool("t")))
    assert (names(catalogue), catalogue.collisions) == (["a__t", "b__t"], ())


def test_an_unprefixed_tool_can_collide_with_a_prefixed_one() -> None:
    catalogue = build([("a", ""), ("b", "b")], snap("a", tool("b__t")), snap("b", tool("t")))
    assert catalogue.collisions == (Collision("b__t", "a", "b"),)


# ---------------------------------------------------------------- renames and hidden tools


def test_a_renamed_tool_is_reported_with_both_names() -> None:
    catalogue = build([("b", "b")], snap("b", tool("bad name"), tool("good")))
    assert catalogue.renamed == (("b", "bad name", "b__bad_name_5880eb90"),)
    assert catalogue.by_name["b__bad_name_5880eb90"].original == "bad name"
    assert catalogue.by_name["b__bad_name_5880eb90"].decoded()["name"] == "b__bad_name_5880eb90"


def test_a_tool_that_requires_tasks_is_hidden_and_reported() -> None:
    catalogue = build([("a", "a")], snap("a", tool("sync"), tool("long", execution={"taskSupport": "required"})))
    assert names(catalogue) == ["a__sync"]
    assert catalogue.hidden == (("a", "long"),)


def test_a_tool_that_requires_tasks_is_listed_to_task_clients_when_its_backend_serves_2025_11_25_tasks() -> None:
    serving = replace(snap("a", tool("sync"), tool("long", execution={"taskSupport": "required"})),
                      offers=frozenset({TASK_CALLS_OFFER}))
    catalogue = build([("a", "a")], serving)
    assert (names(catalogue), catalogue.hidden, catalogue.gated) == (["a__sync", "a__long"], (), True)
    assert (catalogue.by_name["a__long"].tool.needs, catalogue.by_name["a__sync"].tool.needs) == ({TASK_TRAIT}, set())


def test_a_tool_with_optional_or_forbidden_task_support_is_shown() -> None:
    catalogue = build([("a", "a")], snap("a", tool("o", execution={"taskSupport": "optional"}),
                                         tool("f", execution={"taskSupport": "forbidden"}),
                                         tool("w", execution="required")))
    assert (names(catalogue), catalogue.hidden) == (["a__o", "a__f", "a__w"], ())


def test_task_support_named_only_in_text_or_nested_fields_does_not_hide_a_tool() -> None:
    catalogue = build([("a", "a")], snap("a", tool("d", description='set "taskSupport": "required" later'),
                                         tool("n", inputSchema={"execution": {"taskSupport": "required"}})))
    assert (names(catalogue), catalogue.hidden) == (["a__d", "a__n"], ())


def test_a_hidden_tool_does_not_win_a_collision() -> None:
    catalogue = build([("a", ""), ("b", "")], snap("a", tool("t", execution={"taskSupport": "required"})),
                      snap("b", tool("t")))
    assert (catalogue.by_name["t"].backend, catalogue.collisions) == ("b", ())


def test_the_snapshots_are_kept_on_the_catalogue() -> None:
    a = snap("a", tool("x"))
    assert build([("a", "a")], a).snapshots == {"a": a}


# ---------------------------------------------------------------- versions


def test_the_snapshot_version_ignores_key_order() -> None:
    reordered = [{"description": "d", "name": "a"}]
    assert snapshot_version([{"name": "a", "description": "d"}]) == snapshot_version(reordered)


def test_the_snapshot_version_changes_when_a_tool_changes() -> None:
    assert snapshot_version([tool("a")]) != snapshot_version([tool("a", description="new")])
    assert snapshot_version([tool("a"), tool("b")]) != snapshot_version([tool("b"), tool("a")])


def test_the_snapshot_version_is_16_hex_characters() -> None:
    assert snapshot_version([]) == "4f53cda18c2baa0c"


def test_the_snapshot_version_hashes_the_whole_sorted_list_so_stored_versions_stay_valid() -> None:
    tools = [tool("b", description="é"), tool("a", annotations={"z": 1, "a": [2]})]
    whole = hashlib.sha256(orjson.dumps(tools, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
    assert snapshot_version(tools) == whole


def test_a_version_hash_fed_one_tool_at_a_time_can_be_read_midway() -> None:
    version = VersionHash()
    version.add(tool("a"))
    assert version.hexdigest() == snapshot_version([tool("a")])
    version.add(tool("b"))
    assert version.hexdigest() == snapshot_version([tool("a"), tool("b")])


def test_the_catalogue_version_is_stable_for_the_same_input() -> None:
    first = build([("a", "a"), ("b", "")], snap("a", tool("x")), snap("b", tool("y")))
    second = build([("a", "a"), ("b", "")], snap("a", tool("x")), snap("b", tool("y")))
    assert first.version == second.version
    assert len(first.version) == 16


def test_the_catalogue_version_changes_when_a_tool_changes() -> None:
    before = build([("a", "a"), ("b", "b")], snap("a", tool("x")), snap("b", tool("y")))
    after = build([("a", "a"), ("b", "b")], snap("a", tool("x")), snap("b", tool("y", description="changed")))
    assert before.version != after.version


def test_the_catalogue_version_changes_when_a_backend_goes_missing() -> None:
    before = build([("a", "a"), ("b", "b")], snap("a", tool("x")), snap("b", tool("y")))
    after = build([("a", "a"), ("b", "b")], snap("a", tool("x")))
    assert before.version != after.version


def test_the_catalogue_version_changes_with_order_or_namespace() -> None:
    a, b = snap("a", tool("t")), snap("b", tool("t"))
    versions = {build([("a", ""), ("b", "")], a, b).version, build([("b", ""), ("a", "")], a, b).version,
                build([("a", "x"), ("b", "")], a, b).version}
    assert len(versions) == 3


def test_with_a_memo_an_unchanged_backend_keeps_the_same_entry_objects() -> None:
    memo: dict[str, Any] = {}
    order = [("a", "a"), ("b", "b")]
    first = merge(order, {"a": snap("a", tool("x")), "b": snap("b", tool("y"))}, "__", memo)
    second = merge(order, {"a": snap("a", tool("x")), "b": snap("b", tool("y"), tool("z"))}, "__", memo)
    assert second.by_name["a__x"] is first.by_name["a__x"]
    assert second.by_name["b__y"] is not first.by_name["b__y"]
    assert names(second) == ["a__x", "b__y", "b__z"]
    assert set(memo) == {"a", "b"}


def test_a_memo_does_not_change_the_merge() -> None:
    order = [("a", ""), ("b", "")]
    snapshots = {"a": snap("a", tool("x")), "b": snap("b", tool("x"), tool("y"))}
    assert merge(order, snapshots, "__", {}) == merge(order, snapshots, "__")


# ---------------------------------------------------------------- compact tools


@pytest.mark.parametrize("original", [
    {"name": "x"},
    {"description": "name last", "name": "x"},
    {"name": 'quote " and \\ and é and \u2028', "inputSchema": {"type": "object"}, "_meta": None},
])
def test_a_tool_keeps_every_field_as_compact_json(original: JsonObject) -> None:
    compact = Tool.from_dict(original)
    assert (compact.name, compact.decoded()) == (original["name"], original)
    assert orjson.loads(compact.json()) == original
    assert compact.decoded("renamed") == {**original, "name": "renamed"}
    assert len(compact.json()) == len(orjson.dumps(original))  # as compact as orjson writes it


def test_a_tool_is_kept_at_its_own_size() -> None:
    compact = Tool.from_dict(tool("x", description="d" * 100))
    assert len(compact.tail) < 200
    assert compact.tail.__sizeof__() < 300  # not orjson's buffer of several KB


def test_equal_tools_are_equal() -> None:
    assert Tool.from_dict(tool("x")) == Tool.from_dict(tool("x"))
    assert Tool.from_dict(tool("x")) != Tool.from_dict(tool("x", description="d"))


@pytest.mark.parametrize("garbage", [{"description": "no name"}, {"name": 5}, ["name"], "name"])
def test_what_is_not_a_tool_is_refused(garbage: Any) -> None:
    with pytest.raises((KeyError, TypeError)):
        Tool.from_dict(garbage)
