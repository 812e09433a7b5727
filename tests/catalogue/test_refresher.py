"""gateway.catalogue.refresher: what a backend's tools/list pages become in the catalogue."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from conftest import http_backend_config, make_config

from gateway.catalogue.fetch import CHANGED_KINDS
from gateway.catalogue.listings import KINDS
from gateway.catalogue.merge import combined_version, snapshot_version
from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.store import MemorySnapshotStore

JsonObject = dict[str, Any]


def nested(depth: int) -> JsonObject:
    schema: JsonObject = {"type": "object"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


GOOD = [{"name": "first", "description": "d", "inputSchema": {"type": "object"}}, {"name": "second"},
        {"name": "third", "inputSchema": nested(100)}]
BAD = [{"name": ""}, {"name": 5}, {"description": "no name"}, "tool", None,
       {"name": "too_deep", "inputSchema": nested(300)}]  # orjson reads this deep but writes only 254 levels


class PagedUpstream:
    """A backend whose tools/list answers one page per cursor, mixing good and bad tools."""

    def __init__(self, pages: list[list[Any]]) -> None:
        self.pages = pages
        self.asked: list[Any] = []

    async def request(self, method: str, params: JsonObject | None, **_: Any) -> JsonObject:
        index = int((params or {}).get("cursor", 0))
        self.asked.append(index)
        result: JsonObject = {"tools": self.pages[index]}
        if index + 1 < len(self.pages):
            result["nextCursor"] = str(index + 1)
        return {"jsonrpc": "2.0", "id": 1, "result": result}

    server_capabilities: JsonObject = {}

    def on_list_changed(self, callback: Any) -> None: ...


class OnePool:
    def __init__(self, upstream: PagedUpstream) -> None:
        self.upstream = upstream

    def get(self, name: str) -> PagedUpstream:
        return self.upstream


async def refreshed(pages: list[list[Any]]) -> CatalogueService:
    config = make_config([http_backend_config("b", "http://127.0.0.1:9/mcp")])
    pool: Any = OnePool(PagedUpstream(pages))
    service = CatalogueService(config=config, pool=pool, store=MemorySnapshotStore())
    await service.refresh_all()
    return service


async def test_every_page_is_drained_and_only_usable_tools_are_kept() -> None:
    service = await refreshed([[GOOD[0], BAD[0], BAD[1]], [BAD[2], GOOD[1], BAD[3]], [BAD[4], BAD[5], GOOD[2]]])
    assert service.pool.get("b").asked == [0, 1, 2]
    assert [e.exposed for e in service.current.entries] == ["b__first", "b__second", "b__third"]
    assert [e.decoded() for e in service.current.entries] == [{**t, "name": f"b__{t['name']}"} for t in GOOD]


async def test_the_version_is_that_of_the_usable_tools_whatever_the_paging() -> None:
    paged = await refreshed([[GOOD[0]], [BAD[0], GOOD[1]], [GOOD[2]]])
    whole = await refreshed([[*GOOD, *BAD]])
    assert paged.current.snapshots["b"].version == whole.current.snapshots["b"].version == snapshot_version(GOOD)


async def test_the_listing_clients_get_carries_the_kept_tools() -> None:
    service = await refreshed([[*GOOD, *BAD]])
    page = orjson.loads(orjson.dumps(service.view(service.config.tenants["acme"]).page(None)))
    assert [t["name"] for t in page["tools"]] == ["b__first", "b__second", "b__third"]


# ---------------------------------------------------------------- prompts, resources and templates


class OfferingUpstream:
    """A backend that declared `capabilities` and answers each list method from `answers` (pages by cursor)."""

    def __init__(self, capabilities: JsonObject, answers: dict[str, list[JsonObject]]) -> None:
        self.server_capabilities = capabilities
        self.answers = answers
        self.asked: list[tuple[str, Any]] = []
        self.held: dict[str, asyncio.Event] = {}  # method -> released: its answer, read, waits for it

    async def request(self, method: str, params: JsonObject | None, **_: Any) -> JsonObject:
        cursor = (params or {}).get("cursor")
        self.asked.append((method, cursor))
        pages = self.answers.get(method)
        if pages is None:
            return {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}}
        index = int(cursor or 0)
        result = dict(pages[index])
        if index + 1 < len(pages):
            result["nextCursor"] = str(index + 1)
        if method in self.held:
            await self.held[method].wait()
        return {"jsonrpc": "2.0", "id": 1, "result": result}

    def on_list_changed(self, callback: Any) -> None: ...


async def offering(upstream: OfferingUpstream) -> CatalogueService:
    config = make_config([http_backend_config("b", "http://127.0.0.1:9/mcp")])
    service = CatalogueService(config=config, pool=OnePool(upstream), store=MemorySnapshotStore())  # type: ignore[arg-type]
    await service.refresh_all()
    return service


async def test_the_kinds_a_backend_declared_are_fetched_page_by_page() -> None:
    upstream = OfferingUpstream({"tools": {}, "prompts": {}, "resources": {}, "completions": {}}, {
        "tools/list": [{"tools": GOOD[:1]}],
        "prompts/list": [{"prompts": [{"name": "p1"}]}, {"prompts": [{"name": ""}, {"name": "p2"}]}],
        "resources/list": [{"resources": [{"uri": "x://1", "name": "one"}]}],
        "resources/templates/list": [{"resourceTemplates": [{"uriTemplate": "x://{n}", "name": "n"}]}],
    })
    service = await offering(upstream)
    snapshot = service.current.snapshots["b"]
    assert [i.key for i in snapshot.lists["prompts"]] == ["p1", "p2"]
    assert snapshot.offers == {"tools", "prompts", "resources", "completions"}
    assert ("prompts/list", "1") in upstream.asked
    view = service.view(service.config.tenants["acme"])
    assert [e.exposed for e in view.listing(KINDS[1]).entries] == ["b+x://1"]


async def test_kinds_a_backend_did_not_declare_are_not_asked_for() -> None:
    upstream = OfferingUpstream({"tools": {}}, {"tools/list": [{"tools": GOOD}], "prompts/list": [{"prompts": []}]})
    service = await offering(upstream)
    assert [method for method, _ in upstream.asked] == ["tools/list"]
    snapshot = service.current.snapshots["b"]
    assert snapshot.lists == {} and snapshot.offers == {"tools"}
    assert snapshot.version == combined_version(snapshot_version(GOOD), {}, frozenset({"tools"}))


async def test_a_declared_list_the_backend_refuses_leaves_that_kind_empty_and_the_rest_fresh() -> None:
    upstream = OfferingUpstream({"prompts": {}, "resources": {}}, {
        "tools/list": [{"tools": GOOD}], "resources/list": [{"resources": "not a list"}]})
    service = await offering(upstream)
    snapshot = service.current.snapshots["b"]
    assert snapshot.status == "ok" and snapshot.lists == {} and len(snapshot.tools) == 3


async def test_a_change_in_prompts_alone_changes_the_backends_version() -> None:
    answers: dict[str, list[JsonObject]] = {"tools/list": [{"tools": GOOD}],
                                            "prompts/list": [{"prompts": [{"name": "a"}]}]}
    before = (await offering(OfferingUpstream({"prompts": {}}, answers))).current.snapshots["b"].version
    answers["prompts/list"] = [{"prompts": [{"name": "a", "description": "now described"}]}]
    after = (await offering(OfferingUpstream({"prompts": {}}, answers))).current.snapshots["b"].version
    assert before != after


async def test_a_prompts_list_changed_lists_the_prompts_again_and_nothing_else() -> None:
    answers: dict[str, list[JsonObject]] = {
        "tools/list": [{"tools": GOOD}], "prompts/list": [{"prompts": [{"name": "a"}]}],
        "resources/list": [{"resources": [{"uri": "x://1", "name": "one"}]}],
        "resources/templates/list": [{"resourceTemplates": []}]}
    upstream = OfferingUpstream({"prompts": {}, "resources": {}}, answers)
    service = await offering(upstream)
    answers["prompts/list"] = [{"prompts": [{"name": "a"}, {"name": "b"}]}]
    upstream.asked.clear()
    await service.refresh("b", kinds=CHANGED_KINDS["notifications/prompts/list_changed"])
    assert [method for method, _ in upstream.asked] == ["prompts/list"]
    partial = service.current.snapshots["b"]
    assert [i.key for i in partial.lists["prompts"]] == ["a", "b"]
    assert [i.key for i in partial.lists["resources"]] == ["x://1"] and len(partial.tools) == 3
    whole = (await offering(OfferingUpstream({"prompts": {}, "resources": {}}, answers))).current.snapshots["b"]
    assert partial.version == whole.version  # the same lists make the same version, however they were fetched


async def test_a_resources_list_changed_lists_resources_and_templates_again() -> None:
    answers: dict[str, list[JsonObject]] = {"tools/list": [{"tools": GOOD}], "prompts/list": [{"prompts": []}],
                                            "resources/list": [{"resources": []}],
                                            "resources/templates/list": [{"resourceTemplates": []}]}
    upstream = OfferingUpstream({"prompts": {}, "resources": {}}, answers)
    service = await offering(upstream)
    upstream.asked.clear()
    await service.refresh("b", kinds=CHANGED_KINDS["notifications/resources/list_changed"])
    assert sorted(method for method, _ in upstream.asked) == ["resources/list", "resources/templates/list"]
    upstream.asked.clear()
    await service.refresh("b", kinds=CHANGED_KINDS["notifications/tools/list_changed"])
    assert [method for method, _ in upstream.asked] == ["tools/list"]


async def test_a_one_kind_refresh_after_a_failed_one_lists_everything() -> None:
    answers: dict[str, list[JsonObject]] = {"tools/list": [{"tools": GOOD}], "prompts/list": [{"prompts": []}]}
    upstream = OfferingUpstream({"tools": {}, "prompts": {}}, answers)
    service = await offering(upstream)
    del answers["tools/list"]  # tools/list now fails: the snapshot goes stale
    await service.refresh("b")
    assert service.current.snapshots["b"].status == "stale"
    answers["tools/list"] = [{"tools": GOOD[:1]}]
    upstream.asked.clear()
    await service.refresh("b", kinds=CHANGED_KINDS["notifications/prompts/list_changed"])
    assert [method for method, _ in upstream.asked] == ["tools/list", "prompts/list"]
    assert service.current.snapshots["b"].status == "ok" and len(service.current.snapshots["b"].tools) == 1


def listed(service: CatalogueService) -> tuple[list[str], list[str]]:
    snapshot = service.current.snapshots["b"]
    return [tool.name for tool in snapshot.tools], [item.key for item in snapshot.lists.get("prompts", ())]


async def test_two_kinds_re_listed_at_once_both_stay_new() -> None:
    """A one-kind fetch builds on the snapshot installed when it begins: two at once must not undo each other."""
    answers: dict[str, list[JsonObject]] = {"tools/list": [{"tools": GOOD[:1]}], "prompts/list": [{"prompts": []}]}
    upstream = OfferingUpstream({"prompts": {}}, answers)
    service = await offering(upstream)
    answers["tools/list"] = [{"tools": GOOD[:2]}]
    upstream.held["tools/list"] = asyncio.Event()
    tools = asyncio.create_task(service.refresh("b", kinds=CHANGED_KINDS["notifications/tools/list_changed"]))
    await asyncio.sleep(0.05)  # its new tools are read, and held
    answers["prompts/list"] = [{"prompts": [{"name": "p"}]}]
    prompts = asyncio.create_task(service.refresh("b", kinds=CHANGED_KINDS["notifications/prompts/list_changed"]))
    await asyncio.sleep(0.05)
    upstream.held["tools/list"].set()
    await asyncio.wait_for(asyncio.gather(tools, prompts), 5)
    assert listed(service) == (["first", "second"], ["p"])


async def test_a_change_announced_during_a_fetch_of_its_kind_is_fetched_after_it() -> None:
    """The fetch under way may have read the list before the change: joining it would miss the change."""
    answers: dict[str, list[JsonObject]] = {"tools/list": [{"tools": GOOD[:1]}], "prompts/list": [{"prompts": []}]}
    upstream = OfferingUpstream({"prompts": {}}, answers)
    service = await offering(upstream)
    upstream.held["tools/list"] = asyncio.Event()
    kinds = CHANGED_KINDS["notifications/tools/list_changed"]
    first = asyncio.create_task(service.refresh("b", kinds=kinds))
    await asyncio.sleep(0.05)  # it has read the one tool
    answers["tools/list"] = [{"tools": GOOD[:2]}]  # then the backend changes, and says so
    second = asyncio.create_task(service.refresh("b", kinds=kinds))
    await asyncio.sleep(0.05)
    upstream.held["tools/list"].set()
    await asyncio.wait_for(asyncio.gather(first, second), 5)
    assert listed(service)[0] == ["first", "second"]


async def test_a_backend_of_prompts_only_that_refuses_tools_list_has_no_tools_and_is_up() -> None:
    """A backend that did not declare `tools` answers tools/list with -32601, as the spec lets it: no tools,
    not a failure (its prompts are still listed)."""
    upstream = OfferingUpstream({"prompts": {}}, {"prompts/list": [{"prompts": [{"name": "p1"}]}]})
    service = await offering(upstream)
    snapshot = service.current.snapshots["b"]
    assert snapshot.status == "ok" and snapshot.tools == () and [i.key for i in snapshot.lists["prompts"]] == ["p1"]


async def test_a_refresh_that_finds_the_same_lists_keeps_the_catalogue_and_moves_the_fetch_time() -> None:
    """Merging the whole catalogue again for each unchanged backend made a full refresh O(backends x tools)."""
    now = [1000.0]
    config = make_config([http_backend_config("b", "http://127.0.0.1:9/mcp")])
    upstream = PagedUpstream([[GOOD[0], GOOD[1]]])
    pool: Any = OnePool(upstream)
    service = CatalogueService(config=config, pool=pool, store=MemorySnapshotStore(), clock=lambda: now[0])
    await service.refresh_all()
    first = service.current
    now[0] += 60
    await service.refresh_all()
    assert service.current.entries is first.entries and service.current.version == first.version
    assert service.current.snapshots["b"].fetched_at == 1060.0
    upstream.pages = [[GOOD[0]]]  # the backend drops a tool: merged, and the new catalogue served
    now[0] += 60
    await service.refresh_all()
    assert [e.exposed for e in service.current.entries] == ["b__first"]


async def test_the_first_build_merges_every_backends_first_listing_once(monkeypatch: Any) -> None:
    """A merge per backend made start-up O(backends x tools): the first build merges once, at its end,
    and requests (which wait for `ready`) never see a catalogue without its backends."""
    from gateway.catalogue import refresher

    builds: list[int] = []

    def counted(order: Any, snapshots: Any, *args: Any) -> Any:
        builds.append(len(snapshots))
        return real_build(order, snapshots, *args)

    real_build = refresher.build
    monkeypatch.setattr(refresher, "build", counted)
    config = make_config([http_backend_config(f"b{i}", "http://127.0.0.1:9/mcp") for i in range(5)])
    service = CatalogueService(config=config, pool=OnePool(PagedUpstream([GOOD])), store=MemorySnapshotStore())  # type: ignore[arg-type]
    await service.start()
    try:
        await asyncio.wait_for(service.ready.wait(), 10)
        assert builds == [5]
        assert {e.exposed for e in service.current.entries} == {f"b{i}__{t['name']}" for i in range(5) for t in GOOD}
        await service.refresh("b0", kinds=frozenset({"tools"}))  # after it, each change merges at once
        assert len(builds) in (1, 2)  # the same lists: no merge needed
    finally:
        await service.stop()


async def test_a_request_waits_for_the_first_build_only_so_long(monkeypatch: Any) -> None:
    from gateway.catalogue import refresher

    monkeypatch.setattr(refresher, "FIRST_BUILD_WAIT_SECONDS", 0.2)
    config = make_config([http_backend_config("b", "http://127.0.0.1:9/mcp")])
    service = CatalogueService(config=config, pool=OnePool(PagedUpstream([GOOD])), store=MemorySnapshotStore())  # type: ignore[arg-type]
    started = asyncio.get_running_loop().time()
    await service.first_build()  # never started: the build never ends
    assert 0.15 < asyncio.get_running_loop().time() - started < 2
