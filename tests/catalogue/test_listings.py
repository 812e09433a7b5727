"""gateway.catalogue.listings and merge: prompts, resources and templates merged like tools."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.catalogue.listings import PROMPTS, RESOURCES, TEMPLATES, Listed, merge_listing, usable_items
from gateway.catalogue.merge import BackendSnapshot, combined_version, merge, snapshot_version


def prompts(*names: str) -> tuple[Listed, ...]:
    return tuple(Listed.from_dict(PROMPTS, {"name": n, "description": f"about {n}"}) for n in names)  # type: ignore[misc]


def resources(*uris: str) -> tuple[Listed, ...]:
    return tuple(Listed.from_dict(RESOURCES, {"uri": u, "name": u[-1]}) for u in uris)  # type: ignore[misc]


def test_prompt_names_follow_the_tool_rules() -> None:
    long = "p" * 80
    listing = merge_listing(PROMPTS, [("notes", "notes"), ("clock", "")], {
        "notes": prompts("summarize", long, "has space"), "clock": prompts("plan")}, "__")
    exposed = [e.exposed for e in listing.entries]
    assert exposed[0] == "notes__summarize" and exposed[3] == "plan"
    assert len(exposed[1]) == 64 and exposed[1].startswith("notes__ppp")
    assert exposed[2].startswith("notes__has_space_")
    assert [e.original for e in listing.entries] == ["summarize", long, "has space", "plan"]


def test_resource_uris_and_templates_become_gateway_uris() -> None:
    templates = (Listed.from_dict(TEMPLATES, {"uriTemplate": "notes://note/{id}", "name": "note"}),)
    items = {"notes": templates, "files": ()}
    listing = merge_listing(TEMPLATES, [("notes", "notes"), ("files", "")], items, "__")  # type: ignore[arg-type]
    assert [(e.exposed, e.original) for e in listing.entries] == [("notes+notes://note/{id}", "notes://note/{id}")]
    assert listing.entries[0].json(TEMPLATES) == b'{"uriTemplate":"notes+notes://note/{id}","name":"note"}'


def test_the_first_backend_listed_wins_a_collision_and_the_loser_is_reported() -> None:
    listing = merge_listing(RESOURCES, [("a", ""), ("b", "")], {"a": resources("x://1"), "b": resources("x://1", "x://2")},
                            "__")
    assert [(e.exposed, e.backend) for e in listing.entries] == [("x://1", "a"), ("x://2", "b")]
    assert listing.collisions == (("x://1", "a", "b"),)


def test_an_item_keeps_every_field_but_its_key() -> None:
    raw = {"name": "p", "title": "T", "arguments": [{"name": "x", "required": True}], "_meta": {"k": [1]}}
    item = Listed.from_dict(PROMPTS, raw)
    assert item is not None and item.decoded(PROMPTS) == raw
    assert item.json(PROMPTS, "ns__p") == (
        b'{"name":"ns__p","title":"T","arguments":[{"name":"x","required":true}],"_meta":{"k":[1]}}')


@pytest.mark.parametrize("raw", [None, "p", {"name": ""}, {"name": 5}, {"uri": "x://1"}, {"name": "p", "x": 2 ** 70}])
def test_what_is_not_an_item_is_left_out(raw: Any) -> None:
    assert Listed.from_dict(PROMPTS, raw) is None
    kept, raws = usable_items(PROMPTS, [raw, {"name": "ok"}])
    assert [i.key for i in kept] == ["ok"] and raws == [{"name": "ok"}]


def test_the_catalogue_holds_each_kind_and_who_offers_what() -> None:
    snapshot = BackendSnapshot("notes", (), "v", 0.0, lists={"prompts": prompts("p")},
                               offers=frozenset({"prompts", "completions"}))
    catalogue = merge([("notes", "notes")], {"notes": snapshot}, "__")
    assert [e.exposed for e in catalogue.listings["prompts"].entries] == ["notes__p"]
    assert catalogue.listings["resources"].entries == ()
    assert catalogue.offers("notes", "completions") and not catalogue.offers("notes", "resources")
    assert not catalogue.offers("absent", "prompts")


def test_a_backend_with_tools_alone_keeps_the_tool_version() -> None:
    tools_version = snapshot_version([{"name": "t"}])
    assert combined_version(tools_version, {}, frozenset()) == tools_version


def test_prompts_resources_and_offers_each_change_the_version() -> None:
    base = combined_version("t", {"prompts": "1"}, frozenset({"prompts"}))
    assert len({base, combined_version("t", {"prompts": "2"}, frozenset({"prompts"})),
                combined_version("t", {"prompts": "1"}, frozenset({"prompts", "completions"})),
                combined_version("u", {"prompts": "1"}, frozenset({"prompts"}))}) == 4
