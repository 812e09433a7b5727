"""Turns a request's token into a Principal, or refuses it with 401/403.

Order: API key (an exact hash match), then JWT. Verified principals are cached by token
hash (and the audience it was checked against) until they expire (a JWT's `exp`, which is
always there), so the hot path does not re-verify signatures. A token longer than
`auth.max_token_bytes`, or claims longer than MAX_CLAIM_CHARS, are refused (401) before they
can fill the cache or the logs.

OAuth access tokens (signed by an authorization server: jwks_url or public_key_file) follow
the MCP authorization spec: their `aud` must be the gateway's resource URL (or the configured
`auth.jwt.audience`), and they are refused from the query string unless `auth.jwt.query_tokens`.
API keys and the gateway's own HS tokens keep every configured source.

Challenges (WWW-Authenticate, RFC 6750 §3 and RFC 9728 §5.1) name the metadata, the scope a
client should ask for, and on 403 `insufficient_scope` the scopes the call needs, so a client
steps up.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

import structlog

from gateway.auth.api_keys import ApiKeyIndex
from gateway.auth.jwks import JwksCache
from gateway.auth.metadata import configured_resource
from gateway.auth.tokens import Credentials, find_token
from gateway.auth.verifier import InvalidToken, JwtVerifier, claim, scopes_of
from gateway.config import Config
from gateway.protocol.errors import Forbidden, Unauthorized
from gateway.tenancy import Principal

if TYPE_CHECKING:
    from gateway.tracing.spans import Tracing

log = structlog.get_logger("gateway.auth")

CACHE_SIZE = 10_000
API_KEY_CACHE_SECONDS = 300.0
MAX_CLAIM_CHARS = 256
"""The longest tenant, subject or single scope accepted from a token."""
MAX_SCOPES = 100
MAX_GROUPS = 256
"""The most groups a token may carry (identity providers cap theirs at about 200)."""

FailureHook = Callable[[str], None]

DESCRIPTIONS = {
    "audience": "the token was not issued for this resource",
    "typ": "not an access token (RFC 9068 typ at+jwt)",
    "query": "OAuth access tokens must be sent in the Authorization header",
    "expired": "the token has expired",
}
"""`error_description` for the refusals a client can act on (others say only invalid_token)."""


class Authenticator:
    def __init__(self, config: Config, *, clock: Callable[[], float] = time.time,
                 on_failure: FailureHook | None = None, tracing: Tracing | None = None) -> None:
        self.config = config
        self.auth = config.auth
        self.clock = clock
        self.on_failure = on_failure or (lambda reason: None)
        self.api_keys = ApiKeyIndex(config.auth.api_keys)
        jwt_config = config.auth.jwt
        jwks = (JwksCache(jwt_config.jwks_url, cache_seconds=jwt_config.jwks_cache_seconds, tracing=tracing)
                if jwt_config.jwks_url else None)
        self.jwt = JwtVerifier(config.auth.jwt, jwks)
        self._cache: OrderedDict[bytes, Principal] = OrderedDict()
        anonymous = config.auth.anonymous_tenant
        # one object for every tokenless request, so the policy classifies it once (Principal.memo)
        self._anonymous = Principal(anonymous, "anonymous") if anonymous is not None else None

    async def close(self) -> None:
        if self.jwt.jwks is not None:
            await self.jwt.jwks.close()

    async def authenticate(self, credentials: Credentials, data: Any) -> Principal:
        token, source = find_token(credentials, data, self.auth)
        if token is None:
            if self._anonymous is not None:
                return self._anonymous
            self.on_failure("missing")
            raise Unauthorized("Unauthorized: a bearer token is required",
                               headers=self.challenge(credentials))
        principal = await self.principal_for(token, credentials)
        if source == "query" and principal.access_token is not None and not self.auth.jwt.query_tokens:
            self._refuse(InvalidToken("query"), credentials)
        return principal

    async def principal_for(self, token: str, credentials: Credentials | None = None) -> Principal:
        if len(token) > self.auth.max_token_bytes:
            self._refuse(InvalidToken("oversize"), credentials)
        audience = self._audience(credentials)
        key = hashlib.sha256(f"{token}\0{audience}".encode("utf-8", "surrogatepass")).digest()
        cached = self._cache.get(key)
        if cached is not None and (cached.expires_at is None or cached.expires_at > self.clock()):
            self._cache.move_to_end(key)
            return cached
        try:
            principal = await self._verify(token, audience)
        except InvalidToken as exc:
            self._refuse(exc, credentials)
        self._remember(key, principal)
        return principal

    def _audience(self, credentials: Credentials | None) -> str | None:
        """The `aud` a token must name: the configured one; else, for OAuth tokens, the resource asked.

        The gateway's own HS tokens are checked only against a configured audience.
        """
        jwt_config = self.auth.jwt
        if jwt_config.audience is not None or not jwt_config.oauth:
            return jwt_config.audience
        resource = credentials.resource_url() if credentials is not None else None
        return resource or configured_resource(self.config)

    def _refuse(self, exc: InvalidToken, credentials: Credentials | None) -> NoReturn:
        self.on_failure(exc.reason)
        log.info("auth_failed", reason=exc.reason)
        raise Unauthorized("Unauthorized: invalid token", headers=self.challenge(
            credentials, error="invalid_token", description=DESCRIPTIONS.get(exc.reason))) from None

    def require_scope(self, principal: Principal, scope: str, credentials: Credentials) -> None:
        self.require_scopes(principal, frozenset({scope}), credentials)

    def require_scopes(self, principal: Principal, needed: frozenset[str], credentials: Credentials | None) -> None:
        """403 `insufficient_scope` unless the principal holds every scope in `needed`.

        The challenge names what the call needs together with the relevant scopes the token
        already holds (the MCP spec's recommended set), so a client that re-authorizes with it
        loses nothing it had.
        """
        if needed <= principal.scopes:
            return
        self.on_failure("scope")
        missing = sorted(needed - principal.scopes)
        raise Forbidden("Forbidden: insufficient scope", headers=self.challenge(
            credentials, error="insufficient_scope", scope=self.step_up_scope(principal, needed),
            description=f"this call needs the scope {' '.join(missing)}"))

    def step_up_scope(self, principal: Principal, needed: frozenset[str]) -> str:
        """`needed`, plus the scopes the token holds that the gateway knows of, in a stable order."""
        known = {*self.auth.required_scopes, *self.auth.resource_metadata.scopes_supported}
        return " ".join(sorted(needed | (principal.scopes & known)))

    def challenge(self, credentials: Credentials | None, *, error: str | None = None,
                  scope: str | None = None, description: str | None = None) -> dict[str, str]:
        """The WWW-Authenticate header pointing clients at the RFC 9728 metadata.

        Without an explicit `scope` it names what a client should ask for: the scopes every call
        needs, else `scopes_supported` (the spec's scope selection: the challenge comes first).
        """
        parts = []
        if error:
            parts.append(f'error="{error}"')
        if description:
            parts.append(f'error_description="{description}"')
        scope = scope if scope is not None else " ".join(
            self.auth.required_scopes or self.auth.resource_metadata.scopes_supported)
        if scope:
            parts.append(f'scope="{scope}"')
        url = credentials.metadata_url() if credentials is not None else None
        if url is not None:
            # the Host header is client input: keep it from breaking out of the quoted string
            parts.append('resource_metadata="{}"'.format(url.replace('"', "").replace("\\", "")))
        return {"WWW-Authenticate": "Bearer " + ", ".join(parts)}

    async def _verify(self, token: str, audience: str | None) -> Principal:
        if not token:
            raise InvalidToken("empty")
        principal = self.api_keys.lookup(token)
        if principal is not None:
            return replace(principal, expires_at=self.clock() + API_KEY_CACHE_SECONDS)
        if not self.jwt.enabled or token.count(".") != 2:
            raise InvalidToken("unknown_key" if token.count(".") != 2 else "jwt_disabled")
        oauth = self.auth.jwt.oauth
        if oauth and audience is None:  # stdio with neither auth.jwt.audience nor server.public_url
            raise InvalidToken("audience")
        claims = await self.jwt.verify(token, [audience, audience + "/"] if oauth and audience else audience)
        return self._principal_from(claims, token if oauth else None)

    def _principal_from(self, claims: dict[str, Any], access_token: str | None) -> Principal:
        jwt_config = self.auth.jwt
        tenant = claim(claims, jwt_config.tenant_claim)
        subject = claim(claims, jwt_config.subject_claim)
        if not isinstance(tenant, str):
            tenant = ""  # a valid token naming no tenant is refused as an unknown tenant (403)
        if not isinstance(subject, str | int) or isinstance(subject, bool):
            raise InvalidToken("no_subject")
        scopes = scopes_of(claim(claims, jwt_config.scope_claim))
        groups = scopes_of(claim(claims, jwt_config.groups_claim))  # a list, or a space-separated string
        subject = str(subject)
        if max(len(tenant), len(subject)) > MAX_CLAIM_CHARS or len(scopes) > MAX_SCOPES \
                or len(groups) > MAX_GROUPS or any(len(value) > MAX_CLAIM_CHARS for value in (*scopes, *groups)):
            raise InvalidToken("oversize")
        # the verifier checked that exp is a number
        return Principal(tenant, subject, scopes, float(claims["exp"]), groups=groups, claims=claims,
                         access_token=access_token)

    def _remember(self, key: bytes, principal: Principal) -> None:
        self._cache[key] = principal
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)

