"""Keeps the merged catalogue fresh: initial build, periodic refresh, list_changed, staleness."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING

import structlog

from gateway.catalogue.building import build, log_collisions
from gateway.catalogue.fetch import CHANGED_KINDS, BackendLister, RefreshFailed, keepable, traced_snapshot
from gateway.catalogue.hints import HintedRefreshes
from gateway.catalogue.integrity import Integrity
from gateway.catalogue.merge import BackendEntries, BackendSnapshot, Catalogue, ToolEntry, merge, same_snapshot
from gateway.catalogue.pinstore import pin_store_for
from gateway.catalogue.relisting import Relisting
from gateway.catalogue.search import SearchIndex, semantic_ranking
from gateway.catalogue.server_watch import ServerWatch
from gateway.catalogue.states import BackendStates
from gateway.catalogue.store import RefreshLock, SnapshotStore, StoredSnapshot
from gateway.catalogue.variants import traits as client_traits
from gateway.catalogue.views import TenantView, ViewCache
from gateway.config import Backend, Config, TenantConfig
from gateway.metrics.integrity import integrity_metrics
from gateway.metrics.servers import server_metrics
from gateway.policy import Principal
from gateway.upstream.base import Upstream
from gateway.upstream.pool import UpstreamPool

if TYPE_CHECKING:
    from gateway.metrics import Metrics
    from gateway.tracing.spans import Tracing

log = structlog.get_logger("gateway.catalogue")

FRESH_FRACTION = 0.95
"""A stored snapshot checked less than this share of refresh_seconds ago is used as-is (timers jitter)."""

LOCK_POLL_SECONDS = 0.05
"""How often a replica waiting for another one's refresh of a backend asks for its lock again."""

MIN_LOCK_SECONDS = 10.0
"""The shortest refresh lock; a fetch outliving its lock only risks one duplicate fetch."""

FIRST_BUILD_WAIT_SECONDS = 10.0
"""The longest a request arriving during start-up waits for the first build (then it is served what is in)."""

CatalogueListener = Callable[[Catalogue, Catalogue], Awaitable[None]]

RefreshKey = tuple[str, bool, frozenset[str] | None]
"""(backend, forced, the kinds asked for or None for all): refreshes asked with the same key share one."""

class CatalogueService:
    """Owns the current catalogue and the tenant views built from it."""

    def __init__(self, *, config: Config, pool: UpstreamPool, store: SnapshotStore,
                 clock: Callable[[], float] = time.time, metrics: Metrics | None = None,
                 tracing: Tracing | None = None) -> None:
        """`tracing`: each backend's refresh is a span of its own, its list requests CLIENT spans in it."""
        self.config = config
        self.metrics = metrics
        self.tracing = tracing
        self.pool = pool
        self.store = store
        self.clock = clock
        self.order = [(b.name, b.namespace) for b in config.backends]
        self._named: dict[str, BackendEntries] = {}  # per-backend named tools, reused while unchanged
        self.integrity = Integrity(config=config, store=pin_store_for(store), clock=clock,
                                   metrics=integrity_metrics(metrics) if metrics is not None else None)
        self.current = merge(self.order, {}, config.catalogue.separator, self._named)
        self.index = SearchIndex(semantic_ranking())  # find_tools of tenants in search mode: built on the first search
        self._searching = ThreadPoolExecutor(1, thread_name_prefix="tool-search")  # the index is used there only
        self.views = ViewCache(page_size=config.catalogue.page_size, search=config.catalogue.search,
                               on_lookup=metrics.cache_lookup if metrics else None)
        self.ready = asyncio.Event()
        self.states = BackendStates()  # one log line per backend state change
        self.last_refresh: dict[str, float] = {}
        self._listeners: list[CatalogueListener] = []
        self._refreshing: dict[RefreshKey, asyncio.Task[None]] = {}
        self._queued: dict[RefreshKey, asyncio.Task[None]] = {}  # a forced refresh due after the one running
        self._local_locks: dict[str, asyncio.Lock] = {}  # one refresh of a backend at a time in this process
        self._checked_at: dict[str, float] = {}  # when the installed snapshot's refresh started
        self._loop_task: asyncio.Task[None] | None = None
        self._first_build = False
        self._hinted = HintedRefreshes(self.refresh, lambda: self.config.catalogue.refresh_seconds)
        self.relisting = Relisting(refresh=self.refresh, config=lambda: self.config, announces=self._announces)
        self.servers = ServerWatch(servers=lambda: self.config.servers,  # virtual servers' withdrawals
                                   metrics=server_metrics(metrics) if metrics is not None else None)
        self.subscribe(self.servers.changed)
        if metrics is not None:
            self.subscribe(metrics.catalogue_changed)

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        for backend in self.config.backends:
            self.pool.get(backend.name).on_list_changed(self._on_list_changed(backend.name))
        self.store.on_change(self.adopt)  # another replica refreshed a backend
        self.integrity.store.on_change(self.reviewed)  # approvals changed on another replica
        self._loop_task = asyncio.create_task(self._run(), name="catalogue-refresh")

    async def stop(self) -> None:
        tasks = [t for t in (self._loop_task, *self._queued.values(), *self._refreshing.values(),
                             *self._hinted.due.values()) if t]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.relisting.stop()
        self._searching.shutdown(wait=False, cancel_futures=True)

    async def prefetch(self, backend: Backend, upstream: Upstream) -> BackendSnapshot:
        """A snapshot of a backend that is not in the catalogue yet (a reload's new or changed one)."""
        lister = BackendLister(upstream, backend, clock=self.clock, metrics=self.metrics)
        try:
            return await lister.snapshot(None, None)
        except RefreshFailed as exc:
            log.warning("catalogue_refresh_failed", backend=backend.name, error=str(exc), status="down")
            return self._failed(backend.name, None, str(exc))

    def reconfigure(self, config: Config, fresh: Mapping[str, BackendSnapshot]) -> tuple[Catalogue, Catalogue]:
        """Serve `config`'s backends, at once (no await): `fresh` snapshots for the new or changed ones
        (their upstreams already in the pool), the installed ones for the rest; removed backends leave.

        Returns the catalogues before and after, for `announce`.
        """
        for key, task in [*self._queued.items(), *self._refreshing.items()]:
            if key[0] in fresh or config.backend(key[0]) is None:
                task.cancel()  # it asks an upstream that is being retired
        self.config, self.order = config, [(b.name, b.namespace) for b in config.backends]
        self.integrity.config = config
        self.store.track([b.name for b in config.backends])
        self.views.clear(config.catalogue.page_size, config.catalogue.search)  # policies may have changed
        kept = {b.name: self.current.snapshots[b.name] for b in config.backends
                if b.name not in fresh and b.name in self.current.snapshots}
        for name, snapshot in fresh.items():
            self.pool.get(name).on_list_changed(self._on_list_changed(name))
            self.states.observe(name, snapshot.status)
            self.last_refresh[name] = self._checked_at[name] = self.clock()
            if self.metrics is not None:
                self.metrics.catalogue_refreshed(snapshot)
        return self._merge_in({**kept, **fresh})

    async def announce(self, old: Catalogue, new: Catalogue, fresh: Mapping[str, BackendSnapshot]) -> None:
        """After `reconfigure`: the fresh snapshots go to the store, the listeners hear of the change."""
        for name, snapshot in fresh.items():
            await self.integrity.observe(None, snapshot)
            await self.store.save(snapshot, checked_at=self._checked_at[name], changed=True)
        await self._notify(old, new)
        await self._install(dict(self.current.snapshots))  # the new backends' first approvals

    async def reviewed(self, backend: str) -> None:
        """A backend's approvals changed (here or on another replica): rebuild with them."""
        await self.integrity.load(backend)
        await self._install(dict(self.current.snapshots))

    def subscribe(self, listener: CatalogueListener) -> None:
        """Call `listener(old, new)` whenever the catalogue version changes."""
        self._listeners.append(listener)

    # ---------------------------------------------------------------- reading

    async def first_build(self) -> None:
        """Until the first build has ended (a forked worker takes connections before), or at most
        FIRST_BUILD_WAIT_SECONDS: a backend that hangs at start must not hold every client as long."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FIRST_BUILD_WAIT_SECONDS):
                await self.ready.wait()

    def view(self, tenant: TenantConfig, principal: Principal | None = None) -> TenantView:
        """What `principal` sees of its tenant's catalogue (its policy class's view); without one,
        what the tenant's globs alone let through."""
        return self.views.get(self.current, tenant, tenant.policy.access(principal) if principal is not None else None)

    def client_view(self, tenant: TenantConfig, principal: Principal, flags: frozenset[str],
                    modern: bool) -> TenantView:
        """The view a client lists and calls tools in: `principal`'s, and where a backend lists some tools to
        some clients only, that of a client with relayable `flags`, of the 2026 era if `modern`."""
        current = self.current
        traits = client_traits(flags, modern) if current.gated else None  # the usual catalogue: one view
        return self.views.get(current, tenant, tenant.policy.access(principal), traits)

    async def find(self, view: TenantView, query: str, limit: int) -> list[ToolEntry]:
        """The tools of `view` that best match `query`, best first (catalogue.search).

        The index follows the current catalogue; only what the view holds is found (an entry the view
        lacks, however it ranks, is skipped). It runs in a thread of its own: indexing thousands of tools
        after a change, and ranking them, never stall the event loop."""
        def search() -> list[ToolEntry]:
            self.index.sync(self.current)
            return [found.entry for found in self.index.search(query, view.by_name, limit)]
        return await asyncio.get_running_loop().run_in_executor(self._searching, search)

    def _announces(self, backend: str) -> bool:
        """Whether the backend tells of its list changes (one a reload just removed needs no re-list)."""
        try:
            return getattr(self.pool.get(backend), "announces", True)
        except KeyError:
            return True

    def circuit_state(self, backend: str) -> str:
        """The backend's circuit breaker state, as the upstream reports it."""
        return getattr(self.pool.get(backend), "circuit_state", "closed")

    # ---------------------------------------------------------------- refreshing

    async def _run(self) -> None:
        self._first_build = True  # every backend's first listing is merged in one build, at its end
        try:  # not forced: a starting replica uses the snapshots other replicas stored recently
            await self.refresh_all(force=False)
        finally:
            self._first_build = False
            self.ready.set()  # requests wait for it (dispatch): no request runs before the merge below
            await self._install(dict(self.current.snapshots))
        while True:
            await asyncio.sleep(self.config.catalogue.refresh_seconds)
            await self.refresh_all(force=False)

    async def refresh_all(self, *, force: bool = True) -> None:
        await asyncio.gather(*(self.refresh(b.name, force=force) for b in self.config.backends))

    async def refresh(self, backend: str, *, force: bool = True, kinds: frozenset[str] | None = None) -> None:
        """Refresh one backend (only `kinds` of its lists, when given).

        Forced (a change was announced, or an admin asked): ask the backend, unless some
        replica started asking it after this call began; asks made while one with the same
        key runs share one more after it. Not forced (the periodic refresh): a snapshot any
        replica checked within refresh_seconds is used as it is, and asks share the one running.
        """
        key = (backend, force, kinds)
        running = self._refreshing.get(key)
        if running is None:
            task = self._start_refresh(key)
        elif not force:
            task = running  # the periodic refresh: the one under way serves
        else:  # a change announced during a fetch, which may have read the list before it: one more after it
            task = self._queued.get(key) or self._queue(key, running)
        await asyncio.shield(task)

    def _start_refresh(self, key: RefreshKey) -> asyncio.Task[None]:
        task = asyncio.create_task(self._refresh(*key), name=f"refresh-{key[0]}")
        self._refreshing[key] = task
        task.add_done_callback(lambda done: self._refreshing.pop(key) if self._refreshing.get(key) is done else None)
        return task

    def _queue(self, key: RefreshKey, running: asyncio.Task[None]) -> asyncio.Task[None]:
        """The refresh after `running`; every forced ask until it starts shares it."""
        async def after() -> None:
            await asyncio.wait([running])  # its outcome is its own callers'
            del self._queued[key]
            await asyncio.shield(self._start_refresh(key))
        task = self._queued[key] = asyncio.create_task(after(), name=f"refresh-again-{key[0]}")
        return task

    async def adopt(self, backend: str) -> None:
        """Another replica stored a new snapshot of `backend`: rebuild from it, without asking the backend."""
        record = await self.store.get(backend)
        if record is not None and self.config.backend(backend) is not None:
            await self._adopt(record)

    def _on_list_changed(self, backend: str) -> Callable[[str], Awaitable[None]]:
        """A backend's list_changed re-lists that kind of its lists (templates go with resources)."""
        async def changed(method: str) -> None:
            log.info("backend_list_changed", backend=backend, notification=method)
            with contextlib.suppress(Exception):
                await self.refresh(backend, kinds=CHANGED_KINDS.get(method))
        return changed

    async def _refresh(self, backend: str, force: bool, kinds: frozenset[str] | None = None) -> None:
        """Use a fresh stored snapshot, or take the backend's lock and fetch (one replica at a time).

        One at a time per backend here too: a one-kind fetch builds on the snapshot installed when it
        starts, so two at once would each undo the other's kind."""
        async with self._local_locks.setdefault(backend, asyncio.Lock()):
            await self._refresh_alone(backend, force, kinds)

    async def _refresh_alone(self, backend: str, force: bool, kinds: frozenset[str] | None) -> None:
        since = self.clock()
        fresh_since = since if force else since - self.config.catalogue.refresh_seconds * FRESH_FRACTION
        if not force and await self._adopt_stored(backend, fresh_since):
            return
        # Until the first build is done, wait for another replica's refresh rather than start empty.
        lock = await self._lock(backend, wait=force or not self.ready.is_set())
        if lock is None:
            return  # another replica is refreshing it; its snapshot comes with its change event
        try:
            # Checked again under the lock: its previous holder may have just refreshed this backend.
            if await self._adopt_stored(backend, fresh_since):
                return
            await self._fetch_and_save(backend, kinds)
        finally:
            await lock.release()

    async def _lock(self, backend: str, *, wait: bool) -> RefreshLock | None:
        config = self.config.backend(backend)
        ttl = max(MIN_LOCK_SECONDS, 2 * config.timeout_seconds) if config else MIN_LOCK_SECONDS
        deadline = time.monotonic() + ttl
        while True:  # polled: the holder may be another process, which no local event can report
            lock = await self.store.lock(backend, ttl)
            if lock is not None or not wait or time.monotonic() >= deadline:
                return lock
            await asyncio.sleep(LOCK_POLL_SECONDS)

    async def _adopt_stored(self, backend: str, checked_since: float) -> bool:
        """Install the stored snapshot if some replica checked the backend at or after `checked_since`."""
        record = await self.store.get(backend)
        if record is None or record.checked_at < checked_since:
            return False
        await self._adopt(record)
        return True

    async def _adopt(self, record: StoredSnapshot) -> None:
        snapshot = record.snapshot
        backend = snapshot.backend
        if record.checked_at < self._checked_at.get(backend, float("-inf")):
            return  # a late event: the installed snapshot is newer
        self._checked_at[backend] = record.checked_at
        self.last_refresh[backend] = max(self.last_refresh.get(backend, 0.0), record.checked_at)
        current = self.current.snapshots.get(backend)
        if current is not None and same_snapshot(current, snapshot):
            return
        self.states.observe(backend, snapshot.status)  # this replica's view of the backend changed
        await self.integrity.load(backend)  # the replica that listed it may have approved some of it
        if self.metrics is not None:
            self.metrics.snapshot_adopted(snapshot)
        await self._install({**self.current.snapshots, backend: snapshot})

    async def _fetch_and_save(self, backend: str, kinds: frozenset[str] | None = None) -> None:
        config = self.config.backend(backend)
        assert config is not None
        previous = self.current.snapshots.get(backend)
        # A one-kind fetch leaves the other kinds as checked before: the freshness clock stays (no ask
        # made after it, here or on another replica, takes it for a check of every kind).
        checked_at = self._checked_at.get(backend, self.clock()) if keepable(previous, kinds) else self.clock()
        started = time.perf_counter()
        lister = BackendLister(self.pool.get(backend), config, clock=self.clock, metrics=self.metrics)
        try:
            snapshot = await traced_snapshot(lister, previous, kinds, self.tracing)
        except RefreshFailed as exc:
            snapshot = self._failed(backend, previous, str(exc))
            log.warning("catalogue_refresh_failed", backend=backend, error=str(exc),
                        status=snapshot.status)
        else:
            if previous is None or previous.version != snapshot.version or previous.status != "ok":
                log.info("catalogue_refreshed", backend=backend, tools=len(snapshot.tools),
                         **{kind: len(items) for kind, items in snapshot.lists.items()},
                         version=snapshot.version,
                         duration_ms=round((time.perf_counter() - started) * 1000, 2))
        self.states.observe(backend, snapshot.status)
        if self.metrics is not None:
            self.metrics.catalogue_refreshed(snapshot)
        self.last_refresh[backend] = self.clock()
        self._checked_at[backend] = checked_at
        changed = previous is None or (previous.version, previous.status) != (snapshot.version, snapshot.status)
        await self.integrity.observe(previous, snapshot)
        await self.store.save(snapshot, checked_at=checked_at, changed=changed)
        if changed:
            await self._install({**self.current.snapshots, backend: snapshot})
        else:  # the same lists: no merge (one per backend made a full refresh O(backends x tools)), the time moves
            self.current = replace(self.current, snapshots={**self.current.snapshots, backend: snapshot})
        self._hinted.follow(backend, getattr(self.pool.get(backend), "list_ttl_ms", None))

    def _failed(self, backend: str, previous: BackendSnapshot | None, error: str) -> BackendSnapshot:
        """Keep the last good tools until they are older than max_stale_seconds, then drop them."""
        now = self.clock()
        if previous and previous.tools and now - previous.fetched_at <= self.config.catalogue.max_stale_seconds:
            return replace(previous, status="stale", error=error)
        fetched_at = previous.fetched_at if previous else 0.0
        return BackendSnapshot(backend, (), "-", fetched_at, status="down", error=error)

    async def _install(self, snapshots: dict[str, BackendSnapshot]) -> None:
        if self._first_build:  # one merge at its end: a merge per backend made start-up O(backends x tools)
            self.current = replace(self.current, snapshots=snapshots)
        else:
            await self._notify(*self._merge_in(snapshots))

    def _merge_in(self, snapshots: dict[str, BackendSnapshot]) -> tuple[Catalogue, Catalogue]:
        """Merge and install `snapshots` (no await); returns the catalogues before and after."""
        old = self.current
        new = build(self.order, snapshots, self.config.catalogue.separator, self._named, self.integrity)
        log_collisions(old, new)
        self.current = new
        return old, new

    async def _notify(self, old: Catalogue, new: Catalogue) -> None:
        if new.version == old.version:
            return
        for listener in self._listeners:
            try:
                await listener(old, new)
            except Exception:
                log.exception("catalogue_listener_failed")

