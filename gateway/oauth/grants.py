"""Users' grants at third-party authorization servers (user_oauth): sealed, listed, revoked.

One grant per (tenant, subject, backend): the user's access token, refresh token and what the
server said of them. It is sealed (AES-GCM) under a key naming its owner by a hash, with that key
as associated data, so neither a store dump nor a blob moved to another user's key gives a token
away. Each user's backends are indexed, for their own listing; admins list every grant by scanning.
A grant opened with an older key is sealed again with the current one (rotation).
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import orjson
import structlog

from gateway.oauth.crypto import KeyRing, SealError
from gateway.oauth.store import SecretStore
from gateway.store.health import StoreUnavailable

log = structlog.get_logger("gateway.oauth")

GRANT_PREFIX = "grant:"


@dataclass(frozen=True, slots=True)
class Grant:
    tenant: str
    subject: str
    backend: str
    access_token: str = field(repr=False)
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None
    scope: str | None = None
    connected_at: float = 0.0
    refreshed_at: float | None = None

    def described(self) -> dict[str, Any]:
        """What its owner and admins are shown: never a token."""
        return {"backend": self.backend, "scope": self.scope, "connected_at": self.connected_at,
                "refreshed_at": self.refreshed_at, "expires_at": self.expires_at,
                "refreshable": self.refresh_token is not None}

    def renewed(self, access_token: str, refresh_token: str | None, expires_at: float | None, scope: str | None,
                now: float) -> Grant:
        """After a refresh: a server that does not rotate refresh tokens keeps the old one valid."""
        return replace(self, access_token=access_token, refresh_token=refresh_token or self.refresh_token,
                       expires_at=expires_at, scope=scope or self.scope, refreshed_at=now)


def user_key(tenant: str, subject: str) -> str:
    """A user as the store names them: a hash, never the subject in the clear."""
    return hashlib.sha256(f"{tenant}\0{subject}".encode()).hexdigest()[:32]


class Grants:
    def __init__(self, store: SecretStore, keys: KeyRing, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._keys = keys
        self._clock = clock

    async def load(self, tenant: str, subject: str, backend: str) -> Grant | None:
        """The user's grant for `backend`; None when there is none (or it no longer opens)."""
        where = _grant_key(user_key(tenant, subject), backend)
        grant = await self._open(where)
        if grant is not None and (grant.tenant, grant.subject, grant.backend) != (tenant, subject, backend):
            return None  # a hash collision, in theory only
        return grant

    async def save(self, grant: Grant) -> None:
        user = user_key(grant.tenant, grant.subject)
        where = _grant_key(user, grant.backend)
        await self._store.set(where, self._keys.seal(orjson.dumps(asdict(grant)), where))
        await self._store.add_member(f"connections:{user}", grant.backend)

    async def delete(self, tenant: str, subject: str, backend: str) -> Grant | None:
        """Remove the grant (returned, so its tokens can be revoked at the server)."""
        user = user_key(tenant, subject)
        grant = await self.load(tenant, subject, backend)
        await self._store.delete(_grant_key(user, backend))
        await self._store.remove_member(f"connections:{user}", backend)
        return grant

    async def of_user(self, tenant: str, subject: str) -> list[Grant]:
        backends = sorted(await self._store.members(f"connections:{user_key(tenant, subject)}"))
        found = [await self.load(tenant, subject, backend) for backend in backends]
        return [grant for grant in found if grant is not None]

    async def every(self) -> list[Grant]:
        """Every grant in the store (admin listings)."""
        found = [await self._open(where) for where in sorted(await self._store.keys(GRANT_PREFIX))]
        return [grant for grant in found if grant is not None]

    async def _open(self, where: str) -> Grant | None:
        sealed = await self._store.get(where)
        if sealed is None:
            return None
        try:
            plain, stale = self._keys.open(sealed, where)
            grant = Grant(**orjson.loads(plain))
        except (SealError, orjson.JSONDecodeError, TypeError) as exc:
            log.warning("oauth_grant_unreadable", error=str(exc) if isinstance(exc, SealError) else type(exc).__name__)
            return None
        if stale:  # sealed with an older key: sealed again with the current one
            with contextlib.suppress(StoreUnavailable):
                await self._store.set(where, self._keys.seal(plain, where))
        return grant


def _grant_key(user: str, backend: str) -> str:
    return f"{GRANT_PREFIX}{user}:{backend}"
