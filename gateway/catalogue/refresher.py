"""Keeps the merged catalogue fresh: initial build, periodic refresh, list_changed, staleness."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import structlog

from gateway.catalogue.merge import BackendSnapshot, Catalogue, merge, snapshot_version
from gateway.catalogue.store import SnapshotStore
from gateway.catalogue.views import TenantView, ViewCache
from gateway.config import BackendConfig, Config, TenantConfig
from gateway.upstream.base import UpstreamError
from gateway.upstream.pool import UpstreamPool

log = structlog.get_logger("gateway.catalogue")

MAX_PAGES = 1000
"""A backend whose pagination never ends is cut here rather than looping forever."""

CatalogueListener = Callable[[Catalogue, Catalogue], Awaitable[None]]


class RefreshFailed(Exception):
    """A backend's tools/list failed; the message is safe to log and show to admins."""


class CatalogueService:
    """Owns the current catalogue and the tenant views built from it."""

    def __init__(self, *, config: Config, pool: UpstreamPool, store: SnapshotStore,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.pool = pool
        self.store = store
        self.clock = clock
        self.order = [(b.name, b.namespace) for b in config.backends]
        self.current = merge(self.order, {}, config.catalogue.separator)
        self.views = ViewCache(page_size=config.catalogue.page_size)
        self.ready = asyncio.Event()
        self.last_refresh: dict[str, float] = {}
        self._listeners: list[CatalogueListener] = []
        self._refreshing: dict[str, asyncio.Task[None]] = {}
        self._loop_task: asyncio.Task[None] | None = None

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        for backend in self.config.backends:
            self.pool.get(backend.name).on_list_changed(self._on_list_changed(backend.name))
        self._loop_task = asyncio.create_task(self._run(), name="catalogue-refresh")

    async def stop(self) -> None:
        tasks = [t for t in (self._loop_task, *self._refreshing.values()) if t]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def subscribe(self, listener: CatalogueListener) -> None:
        """Call `listener(old, new)` whenever the catalogue version changes."""
        self._listeners.append(listener)

    # ---------------------------------------------------------------- reading

    def view(self, tenant: TenantConfig) -> TenantView:
        return self.views.get(self.current, tenant)

    def circuit_state(self, backend: str) -> str:
        """The backend's circuit breaker state, as the upstream reports it."""
        return getattr(self.pool.get(backend), "circuit_state", "closed")

    # ---------------------------------------------------------------- refreshing

    async def _run(self) -> None:
        await self.refresh_all()
        self.ready.set()
        while True:
            await asyncio.sleep(self.config.catalogue.refresh_seconds)
            await self.refresh_all()

    async def refresh_all(self) -> None:
        await asyncio.gather(*(self.refresh(b.name) for b in self.config.backends))

    async def refresh(self, backend: str) -> None:
        """Refresh one backend; concurrent asks for the same backend share one fetch."""
        task = self._refreshing.get(backend)
        if task is None:
            task = asyncio.create_task(self._refresh(backend), name=f"refresh-{backend}")
            self._refreshing[backend] = task
            task.add_done_callback(lambda _: self._refreshing.pop(backend, None))
        await asyncio.shield(task)

    def _on_list_changed(self, backend: str) -> Callable[[], Awaitable[None]]:
        async def changed() -> None:
            log.info("backend_list_changed", backend=backend)
            with contextlib.suppress(Exception):
                await self.refresh(backend)
        return changed

    async def _refresh(self, backend: str) -> None:
        config = self.config.backend(backend)
        assert config is not None
        started = time.perf_counter()
        previous = self.current.snapshots.get(backend)
        try:
            tools = await self._fetch(config)
        except RefreshFailed as exc:
            snapshot = self._failed(backend, previous, str(exc))
            log.warning("catalogue_refresh_failed", backend=backend, error=str(exc),
                        status=snapshot.status)
        else:
            snapshot = BackendSnapshot(backend, tools, snapshot_version(tools), self.clock())
            if previous is None or previous.version != snapshot.version or previous.status != "ok":
                log.info("catalogue_refreshed", backend=backend, tools=len(tools),
                         version=snapshot.version,
                         duration_ms=round((time.perf_counter() - started) * 1000, 2))
        self.last_refresh[backend] = self.clock()
        await self.store.save(snapshot)
        await self._install({**self.current.snapshots, backend: snapshot})

    def _failed(self, backend: str, previous: BackendSnapshot | None, error: str) -> BackendSnapshot:
        """Keep the last good tools until they are older than max_stale_seconds, then drop them."""
        now = self.clock()
        if previous and previous.tools and now - previous.fetched_at <= self.config.catalogue.max_stale_seconds:
            return replace(previous, status="stale", error=error)
        fetched_at = previous.fetched_at if previous else 0.0
        return BackendSnapshot(backend, (), "-", fetched_at, status="down", error=error)

    async def _fetch(self, backend: BackendConfig) -> tuple[dict[str, Any], ...]:
        """Drain every page of a backend's tools/list."""
        upstream = self.pool.get(backend.name)
        tools: list[dict[str, Any]] = []
        cursor: Any = None
        seen_cursors: set[str] = set()
        for _ in range(MAX_PAGES):
            params = {"cursor": cursor} if cursor is not None else None
            try:
                reply = await upstream.request("tools/list", params, timeout=backend.timeout_seconds)
            except UpstreamError as exc:
                raise RefreshFailed(f"tools/list failed: {exc.reason}") from exc
            result = reply.get("result")
            if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
                raise RefreshFailed("tools/list returned no tool list")
            tools.extend(_usable_tools(backend.name, result["tools"]))
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor or cursor in seen_cursors:
                break
            seen_cursors.add(cursor)
        return tuple(tools)

    async def _install(self, snapshots: dict[str, BackendSnapshot]) -> None:
        old = self.current
        new = merge(self.order, snapshots, self.config.catalogue.separator)
        for collision in new.collisions:
            if collision not in old.collisions:
                log.warning("tool_name_collision", tool=collision.exposed, winner=collision.winner,
                            excluded=collision.loser)
        self.current = new
        if new.version != old.version:
            for listener in self._listeners:
                try:
                    await listener(old, new)
                except Exception:
                    log.exception("catalogue_listener_failed")


def _usable_tools(backend: str, tools: list[Any]) -> list[dict[str, Any]]:
    """Tools a client can use: an object with a non-empty string name."""
    usable = []
    for tool in tools:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str) and tool["name"]:
            usable.append(tool)
        else:
            log.warning("backend_tool_invalid", backend=backend)
    return usable
