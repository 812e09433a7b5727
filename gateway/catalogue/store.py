"""Where backend snapshots live between refreshes: this process (memory) or Redis (shared).

With Redis, every replica reads the snapshots one of them fetched:

- `{prefix}catalogue:{backend}`: the snapshot as JSON (tools, version, fetched_at, status,
  error, checked_at), expiring a while after the last refresh so removed backends go away;
- `{prefix}catalogue-lock:{backend}`: the refresh lock, `SET NX PX` with a random token,
  released only by its owner (a Lua check-and-delete), so one replica at a time asks a backend;
- a `catalogue` event on the store's channel when a saved snapshot changed, on which every
  other replica reads it and rebuilds its catalogue.

`checked_at` is when the refresh that produced a snapshot *started*: a replica that heard of
a change at time t trusts a snapshot checked at or after t, and fetches itself otherwise.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import orjson
import structlog

from gateway.catalogue.listings import BY_NAME, Listed
from gateway.catalogue.merge import BackendSnapshot, Tool
from gateway.store.events import EventBus
from gateway.store.health import StoreHealth, StoreUnavailable

log = structlog.get_logger("gateway.catalogue")

CATALOGUE_EVENT = "catalogue"
"""Event kind: a backend's stored snapshot changed (fields: backend, version)."""

# Deletes the lock only if it still holds our token: an expired lock taken over by another
# replica is not ours to release.
RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

ChangeListener = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class StoredSnapshot:
    snapshot: BackendSnapshot
    checked_at: float  # when the refresh that produced it started (the freshness clock)


class RefreshLock(Protocol):
    async def release(self) -> None: ...


class SnapshotStore(Protocol):
    async def load(self) -> dict[str, BackendSnapshot]:
        """Every stored snapshot, by backend name."""

    async def get(self, backend: str) -> StoredSnapshot | None:
        """The stored snapshot of one backend (the last one known when the store cannot answer)."""

    async def save(self, snapshot: BackendSnapshot, *, checked_at: float | None = None,
                   changed: bool = True) -> None:
        """Store a refresh's result; `changed` tells the other replicas to rebuild."""

    async def lock(self, backend: str, ttl: float) -> RefreshLock | None:
        """The right to refresh `backend` for `ttl` seconds, or None while another replica has it."""

    def on_change(self, listener: ChangeListener) -> None:
        """Call `listener(backend)` when another replica stored a new snapshot of it."""

    def track(self, backends: Sequence[str]) -> None:
        """The backends whose snapshots matter from now on (a reload changed them)."""


class _NoLock:
    """The lock of a store only this process uses (or of Redis while it is down)."""

    async def release(self) -> None:
        return None


NO_LOCK = _NoLock()


class MemorySnapshotStore:
    """The embedded default: snapshots live and die with this process."""

    def __init__(self) -> None:
        self._records: dict[str, StoredSnapshot] = {}

    def track(self, backends: Sequence[str]) -> None:
        """Nothing to follow: no other replica writes here."""

    async def load(self) -> dict[str, BackendSnapshot]:
        return {name: record.snapshot for name, record in self._records.items()}

    async def get(self, backend: str) -> StoredSnapshot | None:
        return self._records.get(backend)

    async def save(self, snapshot: BackendSnapshot, *, checked_at: float | None = None,
                   changed: bool = True) -> None:
        self.put(StoredSnapshot(snapshot, snapshot.fetched_at if checked_at is None else checked_at))

    def put(self, record: StoredSnapshot) -> None:
        self._records[record.snapshot.backend] = record

    async def lock(self, backend: str, ttl: float) -> RefreshLock | None:
        return NO_LOCK  # one process: CatalogueService already runs one refresh per backend at a time

    def on_change(self, listener: ChangeListener) -> None:
        return None  # nobody else writes here


class RedisSnapshotStore:
    """Snapshots shared by every replica through Redis, with this process's copy as the fallback.

    While Redis is down, `get` answers from the last snapshots this replica saw and `save`
    keeps its results aside; when Redis returns, a kept result is written back unless a
    replica checked that backend more recently, and every backend is re-read.
    """

    def __init__(self, redis: Any, *, key_prefix: str, backends: Sequence[str], health: StoreHealth,
                 events: EventBus, ttl_seconds: float) -> None:
        self.redis = redis
        self.key_prefix = key_prefix
        self.backends = tuple(backends)
        self.health = health
        self.events = events
        self.ttl_ms = max(1000, int(ttl_seconds * 1000))
        self._local = MemorySnapshotStore()
        self._unsaved: dict[str, StoredSnapshot] = {}
        self._listeners: list[ChangeListener] = []
        self._release = redis.register_script(RELEASE_SCRIPT)
        events.on(CATALOGUE_EVENT, self._on_event)
        events.on_resync(self.resync)

    def key(self, backend: str) -> str:
        return f"{self.key_prefix}catalogue:{backend}"

    def lock_key(self, backend: str) -> str:
        return f"{self.key_prefix}catalogue-lock:{backend}"

    def track(self, backends: Sequence[str]) -> None:
        """Other replicas' changes of these backends are heard from now on (and re-read after an outage)."""
        self.backends = tuple(backends)

    async def load(self) -> dict[str, BackendSnapshot]:
        snapshots = {}
        for backend in self.backends:
            record = await self.get(backend)
            if record is not None:
                snapshots[backend] = record.snapshot
        return snapshots

    async def get(self, backend: str) -> StoredSnapshot | None:
        try:
            record = await self._read(backend)
        except StoreUnavailable:
            return await self._local.get(backend)
        if record is not None:
            self._local.put(record)
        return record

    async def save(self, snapshot: BackendSnapshot, *, checked_at: float | None = None,
                   changed: bool = True) -> None:
        record = StoredSnapshot(snapshot, snapshot.fetched_at if checked_at is None else checked_at)
        self._local.put(record)
        try:
            await self._write(record, publish=changed)
        except StoreUnavailable:
            self._unsaved[snapshot.backend] = record  # written back when Redis returns
        else:
            self._unsaved.pop(snapshot.backend, None)

    async def lock(self, backend: str, ttl: float) -> RefreshLock | None:
        token = secrets.token_hex(16)
        key = self.lock_key(backend)
        try:
            taken = await self.health.call(lambda: self.redis.set(key, token, nx=True, px=max(1, int(ttl * 1000))))
        except StoreUnavailable:
            return NO_LOCK  # Redis is down: each replica refreshes for itself until it returns
        return _RedisLock(self, key, token) if taken else None

    def on_change(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    async def resync(self) -> None:
        """After (re)connecting: write back what was saved while Redis was down, then re-read everything."""
        for backend, record in list(self._unsaved.items()):
            try:
                stored = await self._read(backend)
                if stored is None or stored.checked_at < record.checked_at:
                    await self._write(record, publish=True)
            except StoreUnavailable:
                return  # down again: the next resync retries
            if self._unsaved.get(backend) is record:
                del self._unsaved[backend]
        for backend in self.backends:
            await self._changed(backend)

    async def _read(self, backend: str) -> StoredSnapshot | None:
        raw = await self.health.call(lambda: self.redis.get(self.key(backend)))
        return decode_snapshot(raw) if raw else None

    async def _write(self, record: StoredSnapshot, *, publish: bool) -> None:
        snapshot = record.snapshot
        await self.health.call(lambda: self.redis.set(self.key(snapshot.backend), encode_snapshot(record),
                                                      px=self.ttl_ms))
        if publish:
            await self.events.publish(CATALOGUE_EVENT, backend=snapshot.backend, version=snapshot.version)

    async def release(self, key: str, token: str) -> None:
        with contextlib.suppress(StoreUnavailable):  # else the lock expires by itself
            await self.health.call(lambda: self._release(keys=[key], args=[token]))

    async def _on_event(self, event: dict[str, Any]) -> None:
        backend = event.get("backend")
        if isinstance(backend, str) and backend in self.backends:
            await self._changed(backend)

    async def _changed(self, backend: str) -> None:
        for listener in self._listeners:
            await listener(backend)


@dataclass(slots=True)
class _RedisLock:
    store: RedisSnapshotStore
    key: str
    token: str

    async def release(self) -> None:
        await self.store.release(self.key, self.token)


def encode_snapshot(record: StoredSnapshot) -> bytes:
    s = record.snapshot
    tools = [orjson.Fragment(tool.json()) for tool in s.tools]  # the tools' own JSON, not re-encoded
    lists = {kind: [orjson.Fragment(item.json(BY_NAME[kind])) for item in items] for kind, items in s.lists.items()}
    return orjson.dumps({"backend": s.backend, "tools": tools, "version": s.version, "fetched_at": s.fetched_at,
                         "status": s.status, "error": s.error, "checked_at": record.checked_at,
                         "lists": lists, "offers": sorted(s.offers), "versions": s.versions,
                         "needs": {str(i): sorted(tool.needs) for i, tool in enumerate(s.tools) if tool.needs}})


def decode_snapshot(raw: bytes | str) -> StoredSnapshot | None:
    """The stored record, or None when it is not one (written by a future or broken version)."""
    try:
        data = orjson.loads(raw)
        needs = {int(i): frozenset(map(str, traits)) for i, traits in data.get("needs", {}).items()}
        tools = tuple(replace(Tool.from_dict(tool), needs=needs.get(i, frozenset()))
                      for i, tool in enumerate(data["tools"]))
        snapshot = BackendSnapshot(backend=data["backend"], tools=tools, version=data["version"],
                                   fetched_at=float(data["fetched_at"]), status=data["status"], error=data["error"],
                                   lists=_decode_lists(data.get("lists", {})),
                                   offers=frozenset(map(str, data.get("offers", ()))),
                                   versions={str(k): str(v) for k, v in data.get("versions", {}).items()})
        return StoredSnapshot(snapshot, float(data["checked_at"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        log.warning("catalogue_snapshot_unreadable")
        return None


def _decode_lists(raw: dict[str, Any]) -> dict[str, tuple[Listed, ...]]:
    """Prompts, resources and templates by kind; a record from before they were stored has none."""
    lists = {}
    for name, items in raw.items():
        kind = BY_NAME[name]
        decoded = tuple(Listed.from_dict(kind, item) for item in items)
        if None in decoded:
            raise ValueError(f"a stored {name} item is not one")
        lists[name] = decoded
    return lists
