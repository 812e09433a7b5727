"""JWT verification with pyjwt: explicit algorithms, and iss/aud/exp/nbf with leeway.

On top of pyjwt's checks: `exp`, `nbf` and `iat` must be JSON numbers (pyjwt also takes
numeric strings, and a principal cached under a string `exp` would never expire), and `exp`
may lie at most `max_lifetime_seconds` ahead (which also refuses absurd values such as 10**400).
An OAuth access token (asymmetric keys) must carry the JOSE `typ` of RFC 9068 (`at+jwt`, which
ID tokens of the same issuer lack) and the claims that profile requires, unless `require_typ`
is null for an issuer that does not mark its access tokens.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt

from gateway.auth.jwks import JwksCache
from gateway.config import JwtConfig


class InvalidToken(Exception):
    """The token is not acceptable; `reason` is a short, secret-free word for logs and metrics."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


TIME_CLAIMS = ("exp", "nbf", "iat")
ACCESS_TOKEN_CLAIMS = ("iss", "exp", "aud", "sub", "client_id", "iat", "jti")
"""What RFC 9068 §2.2 requires of a JWT access token."""
SAME_AUDIENCE = object()
"""`verify`'s default audience: the configured one."""


class JwtVerifier:
    def __init__(self, config: JwtConfig, jwks: JwksCache | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.jwks = jwks
        self.clock = clock
        self._public_key = Path(config.public_key_file).read_text() if config.public_key_file else None

    @property
    def enabled(self) -> bool:
        return bool(self.config.secret or self._public_key or self.jwks)

    async def verify(self, token: str, audience: Any = SAME_AUDIENCE) -> dict[str, Any]:
        """The token's claims, once its signature and registered claims check out.

        `audience` (a string or a list, any of which will do) replaces the configured one.
        """
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken("malformed") from exc
        algorithm = header.get("alg")
        if algorithm not in self.config.algorithms:
            raise InvalidToken("algorithm")
        key = await self._key(header)
        typed = not algorithm.startswith("HS") and self.config.require_typ is not None  # an OAuth access token
        if typed and not _typ_is(header.get("typ"), self.config.require_typ or ""):
            raise InvalidToken("typ")
        claims = self._decode(token, key, self.config.audience if audience is SAME_AUDIENCE else audience,
                              ACCESS_TOKEN_CLAIMS if typed else ("exp",))
        self._check_times(claims)
        return claims

    def _decode(self, token: str, key: Any, audience: Any, required: tuple[str, ...]) -> dict[str, Any]:
        try:
            return jwt.decode(
                token, key, algorithms=list(self.config.algorithms),
                audience=audience, issuer=self.config.issuer,
                leeway=self.config.leeway_seconds,
                options={"require": list(required), "verify_aud": audience is not None},
            )
        except jwt.ExpiredSignatureError as exc:
            raise InvalidToken("expired") from exc
        except jwt.ImmatureSignatureError as exc:
            raise InvalidToken("not_yet_valid") from exc
        except jwt.InvalidAudienceError as exc:
            raise InvalidToken("audience") from exc
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidToken("audience" if exc.claim == "aud" else "claims") from exc
        except jwt.InvalidIssuerError as exc:
            raise InvalidToken("claims") from exc
        except jwt.PyJWTError as exc:
            raise InvalidToken("signature") from exc
        except (TypeError, ValueError) as exc:
            # pyjwt raises these when the token's alg does not fit the key (an RS256 token
            # naming an EC key's kid): attacker input, so a 401, never a 500.
            raise InvalidToken("key_mismatch") from exc

    def _check_times(self, claims: dict[str, Any]) -> None:
        for name in TIME_CLAIMS:
            value = claims.get(name)
            if name in claims and not _is_number(value):
                raise InvalidToken("claims")
        # compared, not subtracted: an int such as 10**400 has no float
        if claims["exp"] > self.clock() + self.config.max_lifetime_seconds + self.config.leeway_seconds:
            raise InvalidToken("lifetime")

    async def _key(self, header: dict[str, Any]) -> Any:
        if header["alg"].startswith("HS"):
            if not self.config.secret:
                raise InvalidToken("algorithm")
            return self.config.secret
        if self._public_key is not None:
            return self._public_key
        if self.jwks is not None:
            kid = header.get("kid")
            found = await self.jwks.get(kid if isinstance(kid, str) else None)
            if found is None:
                raise InvalidToken("unknown_kid")
            return found.key
        raise InvalidToken("algorithm")


def _typ_is(typ: Any, wanted: str) -> bool:
    """JOSE `typ` is a media type whose `application/` prefix may be left out (RFC 7515 §4.1.9)."""
    if not isinstance(typ, str):
        return False
    typ, wanted = typ.lower(), wanted.lower()
    return typ.removeprefix("application/") == wanted.removeprefix("application/")


def _is_number(value: Any) -> bool:
    """A JSON number: not a bool, a string or an infinite/NaN float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) or math.isfinite(value)


def claim(claims: dict[str, Any], path: str) -> Any:
    """A claim by its whole name (`https://example.com/groups`, as namespaced claims are named),
    else by dotted path (`realm_access.roles`); None when there is neither."""
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def scopes_of(value: Any) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(s for s in value if isinstance(s, str))
    return frozenset()
