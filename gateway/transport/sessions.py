"""Client sessions: unguessable ids bound to the principal that opened them.

`MemorySessionStore` serves one process; `RedisSessionStore` lets any replica accept a
session another one opened (see its docstring for keys, events and outages).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import replace
from typing import Any, Protocol

import structlog

from gateway.protocol.capabilities import log_level
from gateway.store.events import EventBus
from gateway.store.health import StoreHealth, StoreUnavailable
from gateway.tenancy import Principal
from gateway.transport.session_records import ENDED, Session, decode, encode, new_session_id

log = structlog.get_logger("gateway.sessions")


class SessionStore(Protocol):
    async def create(self, principal: Principal, protocol_version: str, capabilities: frozenset[str] = frozenset(),
                     server: str = "", client: dict[str, str] | None = None) -> Session: ...

    async def get(self, session_id: str) -> Session | None: ...

    async def delete(self, session_id: str) -> bool: ...

    async def set_log_level(self, session_id: str, level: str) -> None: ...

    def count(self) -> int: ...
    def count_of(self, tenant: str) -> int: ...  # one tenant's sessions here (`limits.sessions` applies to these)

    def on_ended(self, listener: Callable[[str], None]) -> None:
        """Call `listener(session_id)` whenever a session ends, whatever ended it."""


SessionLimit = Callable[[str], int]
"""The most sessions a tenant may hold (by tenant name)."""

SWEEP_SECONDS = 60.0
"""How often idle sessions are looked for, at most (sessions a client never uses again end too)."""


class MemorySessionStore:
    """Sessions of one process, ended after `idle_seconds` without a request.

    Each tenant has its own budget (`limit_for`): a new session beyond it ends that tenant's
    least recently used one, never another tenant's. Listeners hear of every end (DELETE,
    idleness, eviction), so what hangs off a session (its GET stream, replay history) goes too.
    `on_count` hears the number of sessions whenever it changes (the sessions gauge).
    """

    def __init__(self, *, idle_seconds: float = 3600.0, limit_for: SessionLimit | None = None,
                 clock: Callable[[], float] = time.time,
                 id_factory: Callable[[], str] = new_session_id,
                 on_count: Callable[[int], None] | None = None) -> None:
        self.idle_seconds = idle_seconds
        self.limit_for = limit_for or (lambda tenant: 100_000)
        self.clock = clock
        self.id_factory = id_factory
        self.on_count = on_count
        self._sessions: dict[str, Session] = {}
        self._recency: dict[str, OrderedDict[str, None]] = {}  # per tenant, least recently used first
        self._listeners: list[Callable[[str], None]] = []

    def on_ended(self, listener: Callable[[str], None]) -> None:
        self._listeners.append(listener)

    async def create(self, principal: Principal, protocol_version: str, capabilities: frozenset[str] = frozenset(),
                     server: str = "", client: dict[str, str] | None = None) -> Session:
        now = self.clock()
        session = Session(self.id_factory(), principal.tenant, principal.subject,
                          protocol_version, now, now, capabilities, server=server, client=client)
        self.put(session)
        return session

    async def get(self, session_id: str) -> Session | None:
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = self.clock()
        if now - session.last_seen > self.idle_seconds:
            self._end(session_id)
            self._counted()
            return None
        if now - session.last_seen > 1.0:  # refresh at most once a second
            session = self._sessions[session_id] = replace(session, last_seen=now)
        self._recency[session.tenant].move_to_end(session_id)
        return session

    async def delete(self, session_id: str) -> bool:
        existed = self._end(session_id)
        self._counted()
        return existed

    async def set_log_level(self, session_id: str, level: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            self._sessions[session_id] = replace(session, log_level=level)

    def count(self) -> int:
        return len(self._sessions)

    def count_of(self, tenant: str) -> int:
        return len(self._recency.get(tenant, ()))

    def _counted(self) -> None:
        if self.on_count is not None:
            self.on_count(len(self._sessions))

    def put(self, session: Session) -> None:
        """Add a session (new, or made elsewhere for a cache of a shared store), within its tenant's budget."""
        self._sessions[session.id] = session
        recency = self._recency.setdefault(session.tenant, OrderedDict())
        recency[session.id] = None
        recency.move_to_end(session.id)
        limit = self.limit_for(session.tenant)
        while len(recency) > limit:
            self._end(next(iter(recency)))  # the tenant's least recently used goes first
        self._counted()

    def _end(self, session_id: str) -> bool:
        session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        recency = self._recency[session.tenant]
        del recency[session_id]
        if not recency:
            del self._recency[session.tenant]
        for listener in self._listeners:
            listener(session_id)
        return True

    def sessions(self) -> list[Session]:
        """The sessions not idle for too long (expired ones end on the way)."""
        self.sweep()
        return list(self._sessions.values())

    def sweep(self) -> int:
        """End every session idle for too long; returns how many ended."""
        cutoff = self.clock() - self.idle_seconds
        expired = [s.id for s in self._sessions.values() if s.last_seen < cutoff]
        for session_id in expired:
            self._end(session_id)
        if expired:
            self._counted()
        return len(expired)

    async def run(self) -> None:
        """Background task: end idle sessions even if no client ever asks for them again."""
        while True:
            await asyncio.sleep(min(SWEEP_SECONDS, self.idle_seconds / 4))
            self.sweep()


SESSION_ENDED_EVENT = "session_ended"
"""Event kind: a replica ended a session (field: session); the others drop it and close its stream."""

SESSION_CHANGED_EVENT = "session_changed"
"""Event kind: a replica changed a session's log level (fields: session, log_level); the others update their copy."""

MAX_ID_LENGTH = 256
"""Longer Mcp-Session-Id values are not ours: refused without asking Redis."""

RESYNC_BATCH = 100
"""Sessions written back at once when Redis returns (one pooled connection each)."""

FLUSH_SECONDS = 1.0
"""How often the idle TTLs of sessions in use are pushed to Redis (off the request path)."""

# Write a session back (or refresh its idle TTL) unless it was ended meanwhile.
UPSERT_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[2] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
"""


class RedisSessionStore:
    """Sessions in Redis, so any replica accepts them; a local cache keeps Redis off the hot path.

    - `{prefix}session:{id}`: the session as JSON (tenant, subject, protocol version), expiring
      after `idle_seconds`; a replica using a session pushes the expiry back at most every
      `touch_seconds`, in the background.
    - DELETE turns the key into a tombstone (`ended`, same expiry) and publishes `session_ended`:
      every replica drops its cached copy and closes the session's GET stream when the message
      arrives (milliseconds later; until then another replica may still serve the session).
    - Redis down: sessions are created and found in the local cache (those seen before go on
      working); ends are kept. When Redis returns, kept ends are written and every cached
      session is written back unless ended meanwhile (Redis may have restarted empty).
    """

    def __init__(self, redis: Any, *, key_prefix: str, health: StoreHealth, events: EventBus,
                 idle_seconds: float = 3600.0, touch_seconds: float | None = None,
                 limit_for: SessionLimit | None = None, clock: Callable[[], float] = time.time,
                 id_factory: Callable[[], str] = new_session_id,
                 on_count: Callable[[int], None] | None = None) -> None:
        self.redis = redis
        self.key_prefix = key_prefix
        self.health = health
        self.events = events
        self.idle_ms = max(1000, int(idle_seconds * 1000))
        self.touch_seconds = touch_seconds if touch_seconds is not None else min(60.0, idle_seconds / 4)
        self.clock = clock
        self.local = MemorySessionStore(idle_seconds=idle_seconds, limit_for=limit_for, clock=clock,
                                        id_factory=id_factory, on_count=on_count)
        self._touched: dict[str, float] = {}  # when each cached session's expiry was last pushed
        self._due: set[str] = set()
        self._pending_ends: set[str] = set()
        self._upsert = redis.register_script(UPSERT_SCRIPT)
        self._swept_at = clock()
        self.local.on_ended(self._drop)  # a session leaving the cache takes its touch times along
        events.on(SESSION_ENDED_EVENT, self._on_ended_event)
        events.on(SESSION_CHANGED_EVENT, self._on_changed_event)
        events.on_resync(self.resync)

    def key(self, session_id: str) -> str:
        return f"{self.key_prefix}session:{session_id}"

    def on_ended(self, listener: Callable[[str], None]) -> None:
        """Call `listener(session_id)` when a session ends here or on another replica, or leaves the cache
        (ended, idle, or over its tenant's budget on this replica): e.g. to close its stream."""
        self.local.on_ended(listener)

    async def create(self, principal: Principal, protocol_version: str, capabilities: frozenset[str] = frozenset(),
                     server: str = "", client: dict[str, str] | None = None) -> Session:
        session = await self.local.create(principal, protocol_version, capabilities, server, client)
        try:
            await self.health.call(lambda: self.redis.set(self.key(session.id), encode(session), px=self.idle_ms))
        except StoreUnavailable:
            pass  # served locally; written to Redis when it returns (resync)
        else:
            self._touched[session.id] = self.clock()
        return session

    async def get(self, session_id: str) -> Session | None:
        session = await self.local.get(session_id)
        if session is not None:
            self._touch_later(session_id)
            return session
        if len(session_id) > MAX_ID_LENGTH:
            return None
        try:
            raw = await self.health.call(lambda: self.redis.get(self.key(session_id)))
        except StoreUnavailable:
            return None
        session = decode(session_id, raw, self.clock()) if raw else None
        if session is not None:
            self.local.put(session)
            self._touched[session_id] = self.clock()
        return session

    async def delete(self, session_id: str) -> bool:
        existed = await self.local.delete(session_id)
        self._drop(session_id)
        try:
            await self._end(session_id)
        except StoreUnavailable:
            self._pending_ends.add(session_id)  # ended everywhere when Redis returns
        return existed

    async def set_log_level(self, session_id: str, level: str) -> None:
        """Kept locally at once; in Redis and on the other replicas unless Redis is down (then the
        resync writes it back, and other replicas keep their copy until then)."""
        await self.local.set_log_level(session_id, level)
        session = await self.local.get(session_id)
        if session is not None and await self._write_back([session]):
            with suppress(StoreUnavailable):
                await self.events.publish(SESSION_CHANGED_EVENT, session=session_id, log_level=level)

    def count(self) -> int:
        """Sessions this replica knows (those it opened or served), not the cluster's total."""
        return self.local.count()

    def count_of(self, tenant: str) -> int:  # those this replica knows, as count() (budgets are per replica)
        return self.local.count_of(tenant)

    async def run(self) -> None:
        """Background task: push the idle expiry of sessions in use, batched, off the request path."""
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            due, self._due = self._due, set()
            sessions = [s for session_id in due if (s := await self.local.get(session_id)) is not None]
            if sessions and not await self._write_back(sessions):
                self._due |= due  # Redis is down: the resync writes them all anyway
            if self.clock() - self._swept_at >= min(SWEEP_SECONDS, self.local.idle_seconds / 4):
                self._swept_at = self.clock()
                self.local.sweep()  # idle sessions leave the cache, with what hangs off them

    async def resync(self) -> None:
        """After (re)connecting: write the ends kept while down, then every cached session back."""
        for session_id in list(self._pending_ends):
            try:
                await self._end(session_id)
            except StoreUnavailable:
                return
            self._pending_ends.discard(session_id)
        sessions = self.local.sessions()
        for start in range(0, len(sessions), RESYNC_BATCH):
            if not await self._write_back(sessions[start:start + RESYNC_BATCH]):
                return

    async def _write_back(self, sessions: Iterable[Session]) -> bool:
        """Write sessions (or their expiry) to Redis; those ended meanwhile are dropped here too."""
        batch = list(sessions)
        try:
            written = await self.health.call(lambda: asyncio.gather(*(self._upsert_one(s) for s in batch)))
        except StoreUnavailable:
            return False
        now = self.clock()
        for session, ok in zip(batch, written, strict=True):
            if ok:
                self._touched[session.id] = now
            else:
                await self._ended_elsewhere(session.id)
        return True

    async def _upsert_one(self, session: Session) -> int:
        return int(await self._upsert(keys=[self.key(session.id)], args=[encode(session), ENDED, self.idle_ms]))

    async def _end(self, session_id: str) -> None:
        await self.health.call(lambda: self.redis.set(self.key(session_id), ENDED, px=self.idle_ms))
        await self.events.publish(SESSION_ENDED_EVENT, session=session_id)

    def _touch_later(self, session_id: str) -> None:
        if self.clock() - self._touched.get(session_id, 0.0) >= self.touch_seconds:
            self._due.add(session_id)

    def _drop(self, session_id: str) -> None:
        self._touched.pop(session_id, None)
        self._due.discard(session_id)

    async def _on_ended_event(self, event: dict[str, Any]) -> None:
        session_id = event.get("session")
        if isinstance(session_id, str):
            await self._ended_elsewhere(session_id)

    async def _on_changed_event(self, event: dict[str, Any]) -> None:
        session_id, level = event.get("session"), log_level(event.get("log_level"))
        if isinstance(session_id, str) and level is not None:
            await self.local.set_log_level(session_id, level)  # a copy this replica holds, if any

    async def _ended_elsewhere(self, session_id: str) -> None:
        await self.local.delete(session_id)  # its listeners hear of it
        self._drop(session_id)
