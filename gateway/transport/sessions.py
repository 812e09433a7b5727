"""Client sessions: unguessable ids bound to the principal that opened them."""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from gateway.tenancy import Principal


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    tenant: str
    subject: str
    protocol_version: str
    created_at: float
    last_seen: float

    def belongs_to(self, principal: Principal) -> bool:
        return self.tenant == principal.tenant and self.subject == principal.subject


def new_session_id() -> str:
    """256 random bits, URL-safe (visible ASCII as the spec requires)."""
    return secrets.token_urlsafe(32)


class SessionStore(Protocol):
    async def create(self, principal: Principal, protocol_version: str) -> Session: ...

    async def get(self, session_id: str) -> Session | None: ...

    async def delete(self, session_id: str) -> bool: ...

    def count(self) -> int: ...


class MemorySessionStore:
    """Sessions of one process, expired after `idle_seconds` without a request."""

    def __init__(self, *, idle_seconds: float = 3600.0, max_sessions: int = 100_000,
                 clock: Callable[[], float] = time.time,
                 id_factory: Callable[[], str] = new_session_id) -> None:
        self.idle_seconds = idle_seconds
        self.max_sessions = max_sessions
        self.clock = clock
        self.id_factory = id_factory
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    async def create(self, principal: Principal, protocol_version: str) -> Session:
        now = self.clock()
        session = Session(self.id_factory(), principal.tenant, principal.subject,
                          protocol_version, now, now)
        self._sessions[session.id] = session
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)  # the least recently used goes first
        return session

    async def get(self, session_id: str) -> Session | None:
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = self.clock()
        if now - session.last_seen > self.idle_seconds:
            del self._sessions[session_id]
            return None
        if now - session.last_seen > 1.0:  # refresh at most once a second
            session = self._sessions[session_id] = replace(session, last_seen=now)
        self._sessions.move_to_end(session_id)
        return session

    async def delete(self, session_id: str) -> bool:
        return self._sessions.pop(session_id, None) is not None

    def count(self) -> int:
        return len(self._sessions)
