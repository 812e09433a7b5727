"""Listing one backend: its tools, then the prompts, resources and templates it declared, every page.

A refresh may ask for some kinds only (a backend's `notifications/prompts/list_changed` re-lists
its prompts, not its thousand tools); the other kinds are kept from the previous snapshot, whose
per-kind versions make the new snapshot's version without listing them again.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from gateway.catalogue.listings import (
    KINDS,
    OFFERED,
    SUBSCRIBE,
    TASK_CALLS_OFFER,
    TASKS_OFFER,
    Kind,
    Listed,
    usable_items,
)
from gateway.catalogue.merge import BackendSnapshot, Tool, VersionHash, combined_version, snapshot_version
from gateway.catalogue.variants import variant_tools
from gateway.config import BackendConfig
from gateway.protocol import spec
from gateway.protocol.capabilities import NONE, declares_tasks, serves_task_calls
from gateway.tracing.context import CURRENT
from gateway.upstream.base import JsonObject, Upstream, UpstreamError, subscribable

if TYPE_CHECKING:
    from gateway.metrics import Metrics
    from gateway.tracing.spans import Tracing

log = structlog.get_logger("gateway.catalogue")

MAX_PAGES = 1000
"""A backend whose pagination never ends is cut here rather than looping forever."""

TOOLS = "tools"
CHANGED_KINDS: dict[str, frozenset[str]] = {
    spec.TOOLS_LIST_CHANGED: frozenset({TOOLS}),
    spec.PROMPTS_LIST_CHANGED: frozenset({"prompts"}),
    spec.RESOURCES_LIST_CHANGED: frozenset({"resources", "templates"}),
}
"""What a backend's list_changed notification makes the gateway list again."""


class RefreshFailed(Exception):
    """A backend's list failed; the message is safe to log and show to admins."""


class BackendLister:
    """Lists one backend through its upstream, timing each request for the metrics."""

    def __init__(self, upstream: Upstream, backend: BackendConfig, *, clock: Callable[[], float],
                 metrics: Metrics | None = None) -> None:
        self.upstream = upstream
        self.backend = backend
        self.clock = clock
        self.metrics = metrics

    async def snapshot(self, previous: BackendSnapshot | None, kinds: frozenset[str] | None = None) -> BackendSnapshot:
        """The backend's snapshot; with `kinds`, the other kinds come from `previous` when it is a good one."""
        keep = keepable(previous, kinds)
        if TOOLS in keep:
            assert previous is not None
            tools, versions = previous.tools, {TOOLS: previous.versions[TOOLS]}
        else:
            upstream = self.upstream
            tools, tools_version = await variant_tools(self._tools, lambda: getattr(upstream, "eras", ()),
                                                       lambda: getattr(upstream, "lists_per_client", False))
            versions = {TOOLS: tools_version}
        declared = self.upstream.server_capabilities  # known now: the handshake is done
        offers = frozenset(c for c in OFFERED if isinstance(declared.get(c), dict))
        if subscribable(declared):
            offers |= {SUBSCRIBE}
        if declares_tasks(declared):
            offers |= {TASKS_OFFER}
        if serves_task_calls(declared):
            offers |= {TASK_CALLS_OFFER}
        lists: dict[str, tuple[Listed, ...]] = {}
        for kind in (k for k in KINDS if k.capability in offers):
            if kind.name in keep:
                assert previous is not None
                items, versions[kind.name] = previous.lists.get(kind.name, ()), previous.versions[kind.name]
            else:
                items, raws = await self._items(kind)
                versions[kind.name] = snapshot_version(raws)
            if items:
                lists[kind.name] = items
        version = combined_version(versions[TOOLS], {k: v for k, v in versions.items() if k in lists}, offers)
        return BackendSnapshot(self.backend.name, tools, version, self.clock(), lists=lists, offers=offers,
                               versions=versions)

    async def _tools(self, flags: frozenset[str] = NONE) -> tuple[tuple[Tool, ...], str]:
        """Drain every page of the backend's tools/list, as listed to a client with `flags`: its tools and
        their snapshot version."""
        tools: list[Tool] = []
        version = VersionHash()
        cursor: Any = None
        seen_cursors: set[str] = set()
        for _ in range(MAX_PAGES):
            page, cursor = await self._tools_page(cursor, version, flags)
            tools += page
            if not isinstance(cursor, str) or not cursor or cursor in seen_cursors:
                break
            seen_cursors.add(cursor)
        return tuple(tools), version.hexdigest()

    async def _tools_page(self, cursor: Any, version: VersionHash, flags: frozenset[str]) -> tuple[list[Tool], Any]:
        """One page's tools, compacted here so its decoded reply is gone before the next page is asked for."""
        result = await self._page(spec.TOOLS_LIST, cursor, flags)
        if result is None and cursor is None and "tools" not in self.upstream.server_capabilities:
            return [], None  # a backend of prompts or resources only, which refuses tools/list: no tools
        if result is None or not isinstance(result.get("tools"), list):
            raise RefreshFailed("tools/list returned no tool list")
        return _usable_tools(self.backend.name, result["tools"], version), result.get("nextCursor")

    async def _items(self, kind: Kind) -> tuple[tuple[Listed, ...], list[Any]]:
        """Every page of one kind's list; a backend that answers it with an error offers none."""
        items: list[Listed] = []
        raws: list[Any] = []
        cursor: Any = None
        seen_cursors: set[str] = set()
        for _ in range(MAX_PAGES):
            result = await self._page(kind.list_method, cursor)
            if result is None or not isinstance(result.get(kind.result_key), list):
                log.warning("backend_list_refused", backend=self.backend.name, method=kind.list_method)
                return (), []
            kept, kept_raw = usable_items(kind, result[kind.result_key])
            items += kept
            raws += kept_raw
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor or cursor in seen_cursors:
                break
            seen_cursors.add(cursor)
        return tuple(items), raws

    async def _page(self, method: str, cursor: Any, flags: frozenset[str] = NONE) -> JsonObject | None:
        """One page's result (None for a JSON-RPC error); a failed exchange fails the refresh.

        In a refresh's span (tracing on) each page is a CLIENT span, its context in the page's `_meta`."""
        params = {"cursor": cursor} if cursor is not None else None
        refresh = CURRENT.get()
        call = None
        if refresh is not None:
            params = params or {}
            call = refresh.call(self.backend, method, params)
        started = time.perf_counter()
        reply = None
        try:
            reply = await self.upstream.request(method, params, timeout=self.backend.timeout_seconds,
                                                capabilities=flags)
        except UpstreamError as exc:
            raise RefreshFailed(f"{method} failed: {exc.reason} ({exc})") from exc  # e.g. why a child exited
        finally:
            if self.metrics is not None:
                self.metrics.upstream_done(self.backend.name, method, time.perf_counter() - started)
            if call is not None:
                call.settle(reply, sys.exc_info()[1])
        result = reply.get("result")
        return result if isinstance(result, dict) else None


def keepable(previous: BackendSnapshot | None, kinds: frozenset[str] | None) -> frozenset[str]:
    """The kinds a refresh of `kinds` may take from `previous` instead of listing them again."""
    if kinds is None or previous is None or previous.status != "ok":
        return frozenset()
    return frozenset(previous.versions) - kinds


def _usable_tools(backend: str, tools: list[Any], version: VersionHash) -> list[Tool]:
    """The tools a client can use, compacted; each is added to `version`, the others are logged."""
    usable = []
    for raw in tools:
        tool = _usable(raw)
        if tool is None:
            log.warning("backend_tool_invalid", backend=backend)
            continue
        usable.append(tool)
        version.add(raw)
    return usable


def _usable(raw: Any) -> Tool | None:
    """An object with a non-empty string name, as a Tool; None for anything else."""
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        return None
    try:
        return Tool.from_dict(raw)
    except TypeError:  # orjson cannot write it (nested deeper than 254): no client could get it from us
        return None


async def traced_snapshot(lister: BackendLister, previous: BackendSnapshot | None, kinds: frozenset[str] | None,
                          tracing: Tracing | None) -> BackendSnapshot:
    """The backend's snapshot, in a span of its own (a trace of its own: no request asked for it)."""
    if tracing is None:
        return await lister.snapshot(previous, kinds)
    attributes = {"mcpgw.backend": lister.backend.name, "mcpgw.catalogue.kinds": sorted(kinds or ("all",))}
    with tracing.internal("mcpgw catalogue refresh", attributes, root=True) as span:
        snapshot = await lister.snapshot(previous, kinds)
        span.note("mcpgw.catalogue.items", len(snapshot.tools) + sum(map(len, snapshot.lists.values())))
        return snapshot
