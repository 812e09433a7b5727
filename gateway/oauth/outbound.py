"""A backend call's bearer token, by the backend's `auth` mode (a tenant's `backend_auth` first).

- `client_credentials`: the gateway's own token at the backend's authorization server, one for
  every caller, cached (gateway.oauth.tokens).
- `token_exchange` (RFC 8693): the caller's verified OAuth token exchanged for one whose audience is
  the backend and whose subject is the user (with the gateway's own token as actor when `actor`),
  cached per user and capped at the caller's own token's expiry. The caller's token itself never
  goes to a backend.
- `user_oauth`: the user's own grant (gateway.oauth.grants), refreshed with its refresh token once
  for all concurrent calls; without one the caller is sent to authorize (`AuthorizationRequired`).

Backends of the per-user modes get a backend session per user: a backend may bind its sessions to
the token's subject. `CredentialError.reason` is safe to show the client: it names what failed,
never a token or a secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Callable
from typing import Protocol

import structlog

from gateway.config import BackendAuth, Config, HttpBackend
from gateway.config.model import ACCESS_TOKEN_TYPE
from gateway.config.outbound import parse_key
from gateway.oauth.client import AuthorizationServers, OAuthError, TokenReply, targeted
from gateway.oauth.crypto import KeyRing
from gateway.oauth.flows import Authorizations, Link
from gateway.oauth.grants import Grant, Grants, user_key
from gateway.oauth.store import SecretStore
from gateway.oauth.tokens import TokenCache
from gateway.protocol.errors import FailureReason
from gateway.store.health import StoreUnavailable
from gateway.upstream.base import UpstreamError

log = structlog.get_logger("gateway.oauth")

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
PER_USER = frozenset({"token_exchange", "user_oauth"})
REFRESH_LEASE_SECONDS = 10.0


class Caller(Protocol):
    """Who a call is for (a `tenancy.Principal`)."""

    tenant: str
    subject: str
    access_token: str | None
    expires_at: float | None


class CredentialError(Exception):
    """No token for the backend; `reason` is safe to show and log."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class AuthorizationRequired(Exception):
    """The user has no grant at a user_oauth backend: `link` is where they give one."""

    def __init__(self, link: Link) -> None:
        super().__init__(f"authorization required for {link.backend}")
        self.link = link


class BackendCredentials:
    """Every backend's tokens (see the module docstring); one per process, kept across reloads (`rebind`)."""

    def __init__(self, config: Config, store: SecretStore, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self.servers = AuthorizationServers(timeout=config.oauth.timeout_seconds, clock=clock)
        self._refreshing: dict[str, asyncio.Future[Grant]] = {}
        self.tokens = TokenCache(store, None, margin=config.oauth.refresh_margin_seconds, clock=clock)
        self.rebind(config)

    def rebind(self, config: Config) -> None:
        """Serve `config` from now on (a reload): what it configures; cached tokens and grants stay."""
        oauth = config.oauth
        self.config = config
        self.margin = oauth.refresh_margin_seconds
        self.keys = KeyRing([parse_key(key) for key in oauth.keys]) if oauth.keys else None
        self.servers.timeout = oauth.timeout_seconds
        self.tokens.rebind(self.keys, margin=self.margin)
        self.grants = Grants(self.store, self.keys, self.clock) if self.keys is not None else None
        origin = _origin(config.server.public_url) if config.server.public_url else None
        self.flows = Authorizations(self.store, self.keys, self.servers, self.grants, public_origin=origin,
                                    link_seconds=oauth.link_seconds, clock=self.clock) \
            if self.grants is not None and self.keys is not None and origin is not None else None
        self._urls = {b.name: b.url for b in config.backends if isinstance(b, HttpBackend)}
        self._chosen: dict[tuple[str, str | None], BackendAuth | None] = {}
        self.confirm = _confirm_client(config)
        self.enabled = any(isinstance(b, HttpBackend) and b.auth is not None for b in config.backends) or any(
            tenant.backend_auth for tenant in config.tenants.values())

    async def close(self) -> None:
        await self.servers.close()

    async def own_authorization(self, backend: str) -> str | None:
        """The Authorization of the gateway's own requests to `backend` (upstream's OwnAuth)."""
        try:
            return await self.catalogue_bearer(backend)
        except CredentialError as exc:
            raise UpstreamError(FailureReason.UNAUTHORIZED, f"{backend}: {exc.reason}", sent=False) from None

    def auth_for(self, backend: str, tenant: str | None) -> BackendAuth | None:
        """The backend's OAuth for this tenant (its override first), or None: static headers only."""
        key = (backend, tenant)
        if key not in self._chosen:
            self._chosen[key] = self.config.backend_auth(backend, tenant)
        return self._chosen[key]

    def session_key(self, auth: BackendAuth, caller: Caller) -> str:
        """The backend session a call goes in: the tenant's, or the user's for the per-user modes."""
        return f"{caller.tenant}\0{caller.subject}" if auth.mode in PER_USER else caller.tenant

    def resource(self, backend: str, auth: BackendAuth) -> str:
        """The RFC 8707 resource asked for: the configured one ("" for none), else the backend's URL."""
        return auth.resource if auth.resource is not None else self._urls.get(backend, "")

    async def bearer(self, backend: str, auth: BackendAuth, caller: Caller) -> str:
        """The Authorization header value for this call. CredentialError, AuthorizationRequired."""
        try:
            if auth.mode == "client_credentials":
                token = await self.client_token(backend, auth)
            elif auth.mode == "token_exchange":
                token = await self._exchanged(backend, auth, caller)
            else:
                token = await self._granted(backend, auth, caller)
        except OAuthError as exc:
            log.warning("oauth_token_failed", backend=backend, mode=auth.mode, reason=exc.reason)
            raise CredentialError(f"{_what(auth.mode)} failed: {exc.reason}") from None
        except StoreUnavailable:
            raise CredentialError("the token store is unavailable") from None
        return f"Bearer {token}"

    async def catalogue_bearer(self, backend: str) -> str | None:
        """The header for calls no user makes (the catalogue's lists): the gateway's own token, if it has one."""
        auth = self.auth_for(backend, None)
        if auth is None or auth.catalogue_auth != "client_credentials":
            return None
        try:
            return f"Bearer {await self.client_token(backend, auth)}"
        except OAuthError as exc:
            log.warning("oauth_token_failed", backend=backend, mode="client_credentials", reason=exc.reason)
            raise CredentialError(f"client credentials failed: {exc.reason}") from None
        except StoreUnavailable:
            raise CredentialError("the token store is unavailable") from None

    async def refused(self, backend: str, auth: BackendAuth, caller: Caller) -> None:
        """The backend refused our token (HTTP 401/403): forget it, so the next try gets another."""
        if auth.mode == "client_credentials":
            await self.tokens.drop(self._client_key(backend, auth))
        elif auth.mode == "token_exchange":
            await self.tokens.drop(self._exchange_key(backend, auth, caller))
        elif self.grants is not None:
            grant = await self.grants.load(caller.tenant, caller.subject, backend)
            if grant is not None:  # refreshed at the next call, or asked for again if it cannot be
                await self.grants.save(grant.renewed(grant.access_token, None, 0.0, None, self.clock()))

    async def client_token(self, backend: str, auth: BackendAuth) -> str:
        form = targeted({"grant_type": "client_credentials"}, self.resource(backend, auth), auth)
        return await self.tokens.get(self._client_key(backend, auth), lambda: self.servers.token(auth, form))

    async def _exchanged(self, backend: str, auth: BackendAuth, caller: Caller) -> str:
        if caller.access_token is None:
            raise CredentialError("this backend acts for the user: sign in with an OAuth access token")
        subject_token = caller.access_token

        async def exchange() -> TokenReply:
            form = targeted({"grant_type": TOKEN_EXCHANGE, "subject_token": subject_token,
                             "subject_token_type": auth.subject_token_type,
                             "requested_token_type": ACCESS_TOKEN_TYPE}, self.resource(backend, auth), auth)
            if auth.actor:
                form["actor_token"] = await self.client_token(backend, auth)
                form["actor_token_type"] = ACCESS_TOKEN_TYPE
            return await self.servers.token(auth, form)

        return await self.tokens.get(self._exchange_key(backend, auth, caller), exchange, not_after=caller.expires_at)

    async def _granted(self, backend: str, auth: BackendAuth, caller: Caller) -> str:
        if self.grants is None or self.flows is None:
            raise CredentialError("user_oauth is not set up (oauth.keys and server.public_url)")
        grant = await self.grants.load(caller.tenant, caller.subject, backend)
        if grant is None:
            raise AuthorizationRequired(await self.flows.link(caller.tenant, caller.subject, backend))
        if not self._usable(grant):
            grant = await self._refreshed(grant, auth)
        return grant.access_token

    def _usable(self, grant: Grant) -> bool:
        return grant.expires_at is None or grant.expires_at - self.margin > self.clock()

    async def _refreshed(self, grant: Grant, auth: BackendAuth) -> Grant:
        """The grant renewed with its refresh token: once for all concurrent calls here, once across replicas."""
        key = f"{user_key(grant.tenant, grant.subject)}:{grant.backend}"
        pending = self._refreshing.get(key)
        if pending is None:
            pending = self._refreshing[key] = asyncio.ensure_future(self._refresh(key, grant, auth))
            pending.add_done_callback(lambda done: self._refreshing.pop(key, None))
        return await asyncio.shield(pending)

    async def _refresh(self, key: str, grant: Grant, auth: BackendAuth) -> Grant:
        assert self.grants is not None and self.flows is not None
        lease = await self.store.lock(f"lease:grant:{key}", REFRESH_LEASE_SECONDS)
        try:
            if lease is None:  # another replica refreshes it: wait for what it saves
                grant = await self._wait_refreshed(grant)
                if self._usable(grant):
                    return grant
            current = await self.grants.load(grant.tenant, grant.subject, grant.backend)
            if current is None:
                raise AuthorizationRequired(await self.flows.link(grant.tenant, grant.subject, grant.backend))
            if self._usable(current):
                return current
            return await self._renew(current, auth)
        finally:
            if lease is not None:
                with contextlib.suppress(StoreUnavailable):
                    await self.store.unlock(f"lease:grant:{key}", lease)

    async def _renew(self, grant: Grant, auth: BackendAuth) -> Grant:
        assert self.grants is not None and self.flows is not None
        if grant.refresh_token is None:
            await self.grants.delete(grant.tenant, grant.subject, grant.backend)
            raise AuthorizationRequired(await self.flows.link(grant.tenant, grant.subject, grant.backend))
        try:
            form = {"grant_type": "refresh_token", "refresh_token": grant.refresh_token}
            reply = await self.servers.token(auth, targeted(form, self.resource(grant.backend, auth), None))
        except OAuthError as exc:
            if exc.reason not in ("invalid_grant", "unauthorized_client"):
                raise
            log.info("oauth_grant_ended", backend=grant.backend, reason=exc.reason)  # revoked or expired: ask again
            await self.grants.delete(grant.tenant, grant.subject, grant.backend)
            raise AuthorizationRequired(await self.flows.link(grant.tenant, grant.subject, grant.backend)) from None
        renewed = grant.renewed(reply.access_token, reply.refresh_token, reply.expires_at, reply.scope, self.clock())
        await self.grants.save(renewed)
        return renewed

    async def _wait_refreshed(self, grant: Grant) -> Grant:
        assert self.grants is not None
        deadline = self.clock() + REFRESH_LEASE_SECONDS
        while self.clock() < deadline:
            await asyncio.sleep(0.05)
            current = await self.grants.load(grant.tenant, grant.subject, grant.backend)
            if current is None or self._usable(current):
                return current or grant
        return grant

    def _client_key(self, backend: str, auth: BackendAuth) -> str:
        return f"cc:{backend}:{_identity(auth)}"

    def _exchange_key(self, backend: str, auth: BackendAuth, caller: Caller) -> str:
        return f"te:{backend}:{_identity(auth)}:{user_key(caller.tenant, caller.subject)}"


def _confirm_client(config: Config) -> BackendAuth | None:
    """oauth.confirm_user as a client of the gateway's own authorization server."""
    confirm = config.oauth.confirm_user
    if confirm is None:
        return None
    issuer = confirm.issuer or config.auth.resource_metadata.authorization_servers[0]
    scopes = confirm.scopes or config.auth.resource_metadata.scopes_supported
    return BackendAuth(mode="user_oauth", issuer=issuer, client_id=confirm.client_id,
                       client_secret=confirm.client_secret, scopes=scopes, resource=confirm.resource)


def _identity(auth: BackendAuth) -> str:
    """What a cached token depends on: the server, the client and what was asked for."""
    parts = (auth.issuer, auth.token_url, auth.client_id, " ".join(auth.scopes), auth.resource, auth.audience,
             str(auth.actor))
    return hashlib.sha256("\0".join(part or "" for part in parts).encode()).hexdigest()[:16]


def _what(mode: str) -> str:
    return {"client_credentials": "client credentials", "token_exchange": "token exchange",
            "user_oauth": "the user's authorization"}[mode]


def _origin(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme.lower()}://{rest.split('/', 1)[0].lower()}"
