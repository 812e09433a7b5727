"""A user authorizing the gateway at a backend's authorization server (user_oauth): link, sign-in, callback.

1. `link`: a call finds no grant; the user is sent (by URL elicitation, or a tool error) to the
   gateway's own `/oauth/connect/{id}`, an unguessable id bound to the user and the backend,
   valid `oauth.link_seconds`. The link carries nothing about the user and grants nothing by itself.
2. `begin`: the link is opened (once: it is taken from the store); the user's browser is sent on
   to the authorization server with PKCE (S256), a one-time `state`, the RFC 8707 resource and
   the gateway's callback as redirect URI. The state's record holds the PKCE verifier, sealed.
3. `finish`: the server redirects to `/oauth/callback?code=…&state=…`; the state is taken (once),
   the code exchanged with the verifier, and the grant saved for the user the link was made for.

With `oauth.confirm_user`, step 2 is preceded by `confirm`: the opener signs in at the gateway's own
authorization server (the same PKCE round trip, to the same callback) and the access token they
get must name the link's user; a link passed to someone else goes no further (the phishing the MCP
spec warns of: a victim completing an authorization bound to the attacker's account).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode

import orjson

from gateway.config import BackendAuth
from gateway.oauth.client import AuthorizationServers, OAuthError, TokenReply, targeted
from gateway.oauth.crypto import KeyRing, SealError
from gateway.oauth.grants import Grant, Grants
from gateway.oauth.store import SecretStore

CONNECT_PATH = "/oauth/connect/"
CALLBACK_PATH = "/oauth/callback"


@dataclass(frozen=True, slots=True)
class Link:
    """Where a user goes to authorize the gateway at `backend`; `id` doubles as the elicitationId."""

    id: str
    url: str
    backend: str


@dataclass(frozen=True, slots=True)
class Pending:
    tenant: str
    subject: str
    backend: str


class Authorizations:
    def __init__(self, store: SecretStore, keys: KeyRing, servers: AuthorizationServers, grants: Grants, *,
                 public_origin: str, link_seconds: float, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._keys = keys
        self._servers = servers
        self._grants = grants
        self.public_origin = public_origin
        self.redirect_uri = public_origin + CALLBACK_PATH
        self._ttl = link_seconds
        self._clock = clock

    async def link(self, tenant: str, subject: str, backend: str) -> Link:
        link_id = secrets.token_urlsafe(32)
        await self._put(f"link:{link_id}", {"tenant": tenant, "subject": subject, "backend": backend})
        return Link(link_id, f"{self.public_origin}{CONNECT_PATH}{link_id}", backend)

    async def pending(self, link_id: str) -> Pending | None:
        """Whom an unused link is for (it stays unused)."""
        record = await self._open(f"link:{link_id}", await self._store.get(f"link:{link_id}"))
        return Pending(**record) if record is not None else None

    async def begin(self, link_id: str, auth: BackendAuth, default_resource: str) -> str:
        """The authorization URL the link's browser goes on to; OAuthError("unknown_link") if used or expired."""
        record = await self._open(f"link:{link_id}", await self._store.take(f"link:{link_id}"))
        if record is None:
            raise OAuthError("unknown_link")
        return await self._authorize(auth, auth.resource if auth.resource is not None else default_resource, record)

    async def confirm(self, link_id: str, auth: BackendAuth, default_resource: str) -> str:
        """Where the link's opener signs in at the gateway's own authorization server first (to tell who
        they are: the link's user, or someone it was passed to). The link stays unused meanwhile."""
        if await self.pending(link_id) is None:
            raise OAuthError("unknown_link")
        resource = auth.resource if auth.resource is not None else default_resource
        return await self._authorize(auth, resource, {"kind": "confirm", "link": link_id})

    async def _authorize(self, auth: BackendAuth, resource: str, record: dict[str, str]) -> str:
        """An authorization request with PKCE and a one-time state, whose record keeps the verifier."""
        endpoints = await self._servers.endpoints(auth)
        if endpoints.authorization is None:
            raise OAuthError("no_authorization_endpoint")
        state, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(48)
        await self._put(f"state:{state}", {**record, "verifier": verifier, "resource": resource})
        query = targeted({"response_type": "code", "client_id": auth.client_id, "redirect_uri": self.redirect_uri,
                          "state": state, "code_challenge": _challenge(verifier), "code_challenge_method": "S256"},
                         resource, auth)
        separator = "&" if "?" in endpoints.authorization else "?"
        return f"{endpoints.authorization}{separator}{urlencode(query)}"

    async def state(self, state: str) -> dict[str, str] | None:
        """The record of a sign-in under way, taken (a state works once)."""
        return await self._open(f"state:{state}", await self._store.take(f"state:{state}"))

    async def redeem(self, record: dict[str, str], code: str, auth: BackendAuth) -> TokenReply:
        """Exchange the code, with the state's PKCE verifier."""
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": self.redirect_uri,
                "code_verifier": record["verifier"]}
        return await self._servers.token(auth, targeted(form, record["resource"], None))

    async def finish(self, record: dict[str, str], code: str, auth: BackendAuth) -> Grant:
        """Exchange the code and save the user's grant."""
        reply = await self.redeem(record, code, auth)
        now = self._clock()
        grant = Grant(record["tenant"], record["subject"], record["backend"], reply.access_token, reply.refresh_token,
                      reply.expires_at, reply.scope, connected_at=now)
        await self._grants.save(grant)
        return grant

    async def _put(self, where: str, record: dict[str, str]) -> None:
        await self._store.set(where, self._keys.seal(orjson.dumps(record), where), self._ttl)

    async def _open(self, where: str, sealed: str | None) -> dict[str, str] | None:
        if sealed is None:
            return None
        try:
            record = orjson.loads(self._keys.open(sealed, where)[0])
        except (SealError, orjson.JSONDecodeError):
            return None
        return record if isinstance(record, dict) else None


def _challenge(verifier: str) -> str:
    """The PKCE S256 challenge (RFC 7636 §4.2)."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
