"""Turns a request's token into a Principal, or refuses it with 401/403.

Order: API key (an exact hash match), then JWT. Verified principals are cached by token
hash until they expire (a JWT's `exp`, which is always there), so the hot path does not
re-verify signatures. A token longer than `auth.max_token_bytes`, or claims longer than
MAX_CLAIM_CHARS, are refused (401) before they can fill the cache or the logs.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NoReturn

import structlog

from gateway.auth.api_keys import ApiKeyIndex
from gateway.auth.jwks import JwksCache
from gateway.auth.tokens import Credentials, extract_token
from gateway.auth.verifier import InvalidToken, JwtVerifier, claim, scopes_of
from gateway.config import Config
from gateway.errors import Forbidden, Unauthorized
from gateway.tenancy import Principal

log = structlog.get_logger("gateway.auth")

CACHE_SIZE = 10_000
API_KEY_CACHE_SECONDS = 300.0
MAX_CLAIM_CHARS = 256
"""The longest tenant, subject or single scope accepted from a token."""
MAX_SCOPES = 100

FailureHook = Callable[[str], None]


class Authenticator:
    def __init__(self, config: Config, *, clock: Callable[[], float] = time.time,
                 on_failure: FailureHook | None = None) -> None:
        self.config = config
        self.auth = config.auth
        self.clock = clock
        self.on_failure = on_failure or (lambda reason: None)
        self.api_keys = ApiKeyIndex(config.auth.api_keys)
        jwt_config = config.auth.jwt
        jwks = (JwksCache(jwt_config.jwks_url, cache_seconds=jwt_config.jwks_cache_seconds)
                if jwt_config.jwks_url else None)
        self.jwt = JwtVerifier(config.auth.jwt, jwks)
        self._cache: OrderedDict[bytes, Principal] = OrderedDict()

    async def close(self) -> None:
        if self.jwt.jwks is not None:
            await self.jwt.jwks.close()

    async def authenticate(self, credentials: Credentials, data: Any) -> Principal:
        token = extract_token(credentials, data, self.auth)
        if token is None:
            if self.auth.anonymous_tenant is not None:
                return Principal(self.auth.anonymous_tenant, "anonymous")
            self.on_failure("missing")
            raise Unauthorized("Unauthorized: a bearer token is required",
                               headers=self.challenge(credentials))
        return await self.principal_for(token, credentials)

    async def principal_for(self, token: str, credentials: Credentials | None = None) -> Principal:
        if len(token) > self.auth.max_token_bytes:
            self._refuse(InvalidToken("oversize"), credentials)
        key = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        cached = self._cache.get(key)
        if cached is not None and (cached.expires_at is None or cached.expires_at > self.clock()):
            self._cache.move_to_end(key)
            return cached
        try:
            principal = await self._verify(token)
        except InvalidToken as exc:
            self._refuse(exc, credentials)
        self._remember(key, principal)
        return principal

    def _refuse(self, exc: InvalidToken, credentials: Credentials | None) -> NoReturn:
        self.on_failure(exc.reason)
        log.info("auth_failed", reason=exc.reason)
        raise Unauthorized("Unauthorized: invalid token",
                           headers=self.challenge(credentials, error="invalid_token")) from None

    def require_scope(self, principal: Principal, scope: str, credentials: Credentials) -> None:
        if scope not in principal.scopes:
            self.on_failure("scope")
            raise Forbidden("Forbidden: insufficient scope",
                            headers=self.challenge(credentials, error="insufficient_scope", scope=scope))

    def challenge(self, credentials: Credentials | None, *, error: str | None = None,
                  scope: str | None = None) -> dict[str, str]:
        """The WWW-Authenticate header pointing clients at the RFC 9728 metadata."""
        parts = []
        if error:
            parts.append(f'error="{error}"')
        if scope:
            parts.append(f'scope="{scope}"')
        url = credentials.metadata_url() if credentials is not None else None
        if url is not None:
            # the Host header is client input: keep it from breaking out of the quoted string
            parts.append('resource_metadata="{}"'.format(url.replace('"', "").replace("\\", "")))
        return {"WWW-Authenticate": "Bearer " + ", ".join(parts)}

    async def _verify(self, token: str) -> Principal:
        if not token:
            raise InvalidToken("empty")
        principal = self.api_keys.lookup(token)
        if principal is not None:
            return Principal(principal.tenant, principal.subject, principal.scopes,
                             self.clock() + API_KEY_CACHE_SECONDS)
        if not self.jwt.enabled or token.count(".") != 2:
            raise InvalidToken("unknown_key" if token.count(".") != 2 else "jwt_disabled")
        claims = await self.jwt.verify(token)
        return self._principal_from(claims)

    def _principal_from(self, claims: dict[str, Any]) -> Principal:
        jwt_config = self.auth.jwt
        tenant = claim(claims, jwt_config.tenant_claim)
        subject = claim(claims, jwt_config.subject_claim)
        if not isinstance(tenant, str):
            tenant = ""  # a valid token naming no tenant is refused as an unknown tenant (403)
        if not isinstance(subject, str | int) or isinstance(subject, bool):
            raise InvalidToken("no_subject")
        scopes = scopes_of(claim(claims, jwt_config.scope_claim))
        subject = str(subject)
        if max(len(tenant), len(subject)) > MAX_CLAIM_CHARS or len(scopes) > MAX_SCOPES \
                or any(len(scope) > MAX_CLAIM_CHARS for scope in scopes):
            raise InvalidToken("oversize")
        return Principal(tenant, subject, scopes, float(claims["exp"]))  # the verifier checked it is a number

    def _remember(self, key: bytes, principal: Principal) -> None:
        self._cache[key] = principal
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)

