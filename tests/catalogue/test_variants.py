"""Tools listed to some clients only (catalogue.variants), and how they are stored."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.catalogue.merge import BackendSnapshot, Tool, merge, snapshot_version
from gateway.catalogue.store import StoredSnapshot, decode_snapshot, encode_snapshot
from gateway.catalogue.variants import traits, variant_tools
from gateway.protocol.capabilities import AT_2026, ELICITATION_FORM, ROOTS, SAMPLING


def tool(name: str, **fields: Any) -> Tool:
    return Tool.from_dict({"name": name, "inputSchema": {"type": "object", "properties": {}}, **fields})


class Lister:
    """A backend that lists `base` to everyone, and `gated[flag]` besides to clients declaring `flag`."""

    def __init__(self, base: list[Tool], gated: dict[str, list[Tool]] | None = None,
                 modern: list[Tool] | None = None) -> None:
        self.base, self.gated, self.modern = base, gated or {}, modern
        self.asked: list[frozenset[str]] = []

    async def __call__(self, flags: frozenset[str]) -> tuple[Sequence[Tool], str]:
        self.asked.append(flags)
        tools = list(self.modern if AT_2026 in flags and self.modern is not None else self.base)
        tools += [t for flag, extra in self.gated.items() if flag in flags for t in extra]
        return tools, snapshot_version(t.decoded() for t in tools)


async def test_a_backend_that_gates_nothing_costs_one_list_more() -> None:
    lister = Lister([tool("a"), tool("b")])
    tools, _ = await variant_tools(lister, lambda: ("handshake",), lambda: True)
    assert [(t.name, t.needs) for t in tools] == [("a", frozenset()), ("b", frozenset())]
    assert len(lister.asked) == 2


async def test_gated_tools_need_the_group_they_are_listed_with() -> None:
    lister = Lister([tool("a")], {SAMPLING: [tool("sample")], ELICITATION_FORM: [tool("ask")],
                                  ROOTS: [tool("roots")]})
    tools, _ = await variant_tools(lister, lambda: ("handshake",), lambda: True)
    assert {t.name: t.needs for t in tools} == {"a": frozenset(), "sample": {"sampling"}, "ask": {"elicitation"},
                                                "roots": {"roots"}}
    assert len(lister.asked) == 5
    plain, capable = traits(frozenset(), False), traits(frozenset({SAMPLING}), False)
    assert [t.name for t in tools if t.needs <= plain] == ["a"]
    assert [t.name for t in tools if t.needs <= capable] == ["a", "sample"]


async def test_a_backend_that_cannot_tell_clients_apart_is_listed_once() -> None:
    lister = Lister([tool("a")], {SAMPLING: [tool("sample")]})
    tools, _ = await variant_tools(lister, lambda: ("handshake",), lambda: False)
    assert [t.name for t in tools] == ["a"] and len(lister.asked) == 1


async def test_a_dual_era_backend_keeps_what_differs_per_era_and_ignores_key_order() -> None:
    same = tool("same")
    reordered = Tool.from_dict({"name": "same", "inputSchema": {"properties": {}, "type": "object"}})
    lister = Lister([same, tool("only_session")], modern=[reordered, tool("only_2026")])
    tools, _ = await variant_tools(lister, lambda: ("handshake", "2026"), lambda: True)
    assert {t.name: t.needs for t in tools} == {"same": frozenset(), "only_session": {"era.handshake"},
                                                "only_2026": {"era.2026"}}
    catalogue = merge([("b", "b")], {"b": BackendSnapshot("b", tools, "v", 0.0)}, "__")
    assert catalogue.gated and not catalogue.collisions


async def test_a_tool_listed_differently_per_era_is_two_variants_not_a_collision() -> None:
    lister = Lister([tool("t", description="session")], modern=[tool("t", description="2026")])
    tools, _ = await variant_tools(lister, lambda: ("handshake", "2026"), lambda: True)
    catalogue = merge([("b", "b")], {"b": BackendSnapshot("b", tools, "v", 0.0)}, "__")
    assert not catalogue.collisions and len(catalogue.entries) == 2
    assert {e.tool.decoded()["description"] for e in catalogue.entries} == {"session", "2026"}


def test_the_traits_a_tool_needs_survive_the_store() -> None:
    gated = Tool.from_dict({"name": "sample"})
    snapshot = BackendSnapshot("b", (tool("a"), Tool(gated.name, gated.tail, needs=frozenset({"sampling"}))),
                               "v", 1.0)
    stored = decode_snapshot(encode_snapshot(StoredSnapshot(snapshot, 1.0)))
    assert stored is not None and [t.needs for t in stored.snapshot.tools] == [frozenset(), {"sampling"}]
