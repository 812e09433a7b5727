"""A client session's record: who opened it, where, and how it is stored in Redis."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import orjson
import structlog

from gateway.protocol.capabilities import encode_flags, log_level
from gateway.tenancy import Principal

log = structlog.get_logger("gateway.sessions")

ENDED = b"ended"
"""The value a session's key keeps after DELETE (for its idle TTL), so no replica writes it back."""


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    tenant: str
    subject: str
    protocol_version: str
    created_at: float
    last_seen: float
    capabilities: frozenset[str] = frozenset()  # what the client declared that the gateway can relay
    log_level: str | None = None  # its logging/setLevel
    server: str = ""  # the virtual server it was opened on ("": the gateway's own endpoint)
    client: dict[str, str] | None = field(default=None, compare=False)  # initialize's clientInfo (audit.client_of)

    def belongs_to(self, principal: Principal, server: str = "") -> bool:
        """Whether `principal` may use it on `server`'s endpoint: its own, and only where it was opened."""
        return self.tenant == principal.tenant and self.subject == principal.subject and self.server == server


def new_session_id() -> str:
    """256 random bits, URL-safe (visible ASCII as the spec requires)."""
    return secrets.token_urlsafe(32)


def encode(session: Session) -> bytes:
    return orjson.dumps({"tenant": session.tenant, "subject": session.subject,
                         "protocol_version": session.protocol_version, "created_at": session.created_at,
                         "capabilities": encode_flags(session.capabilities), "log_level": session.log_level,
                         "server": session.server, "client": session.client})


def decode(session_id: str, raw: bytes, now: float) -> Session | None:
    """The stored session, or None for a tombstone (ended) or a record this version cannot read."""
    if raw == ENDED:
        return None
    try:
        data = orjson.loads(raw)
        flags = data.get("capabilities")
        declared = frozenset(encode_flags(flags)) if isinstance(flags, list) else frozenset()
        return Session(session_id, str(data["tenant"]), str(data["subject"]), str(data["protocol_version"]),
                       float(data["created_at"]), now, declared, log_level(data.get("log_level")),
                       str(data.get("server") or ""), _client(data.get("client")))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        log.warning("session_record_unreadable")
        return None


def _client(stored: Any) -> dict[str, str] | None:
    """A stored session's client name and version (None from a record written before they were kept)."""
    if not isinstance(stored, dict):
        return None
    return {key: str(value) for key, value in stored.items() if key in ("name", "version")}
