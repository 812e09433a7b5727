"""A JWKS document fetched with aiohttp, cached for `cache_seconds`, refetched on an unknown `kid` (rate-limited).

Keys expire with the cache: once it is older than `cache_seconds`, the next lookup refetches
first, so a key the IdP removed stops working within that time. Keys whose `use` is not
`sig` (encryption keys published in the same set) are never used to verify a signature.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import aiohttp
import jwt
import structlog

if TYPE_CHECKING:
    from gateway.tracing.spans import Tracing

log = structlog.get_logger("gateway.auth")

MIN_REFETCH_SECONDS = 30.0
"""An unknown kid triggers at most one fetch this often, so forged kids cannot flood the IdP."""

MAX_JWKS_BYTES = 512 * 1024
CACHE_SECONDS = 300.0
"""How long a fetched key set is trusted before the next lookup refetches it."""


class JwksCache:
    def __init__(self, url: str, *, clock: Callable[[], float] = time.monotonic,
                 min_refetch_seconds: float = MIN_REFETCH_SECONDS, cache_seconds: float = CACHE_SECONDS,
                 timeout: float = 5.0, tracing: Tracing | None = None) -> None:
        """`tracing`: each fetch is a CLIENT span, under the request it holds up (tracing on)."""
        self.url = url
        self.tracing = tracing
        self.clock = clock
        self.min_refetch_seconds = min_refetch_seconds
        self.cache_seconds = cache_seconds
        self.timeout = timeout
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._lock = asyncio.Lock()
        self._session: aiohttp.ClientSession | None = None

    async def get(self, kid: str | None) -> jwt.PyJWK | None:
        """The key for `kid` (or the only key when the token names none), or None."""
        if self._expired():
            await self._fetch_if(self._expired)
        key = self._find(kid)
        if key is None and self._may_fetch():
            await self._fetch_if(lambda: self._find(kid) is None and self._may_fetch())
            key = self._find(kid)
        return key

    async def _fetch_if(self, needed: Callable[[], bool]) -> None:
        """Fetch once, under the lock, if still `needed` (a concurrent caller may have fetched)."""
        async with self._lock:
            if needed():
                if self.tracing is None:
                    await self._fetch()
                    return
                with self.tracing.internal("jwks fetch", _span_attributes(self.url), kind="client") as span:
                    await self._fetch()
                    span.note("mcpgw.auth.jwks_keys", len(self._keys))

    def _expired(self) -> bool:
        return self._fetched_at is not None and self.clock() - self._fetched_at >= self.cache_seconds

    def _find(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    def _may_fetch(self) -> bool:
        return self._fetched_at is None or self.clock() - self._fetched_at >= self.min_refetch_seconds

    async def _fetch(self) -> None:
        """Replace the key set; on any failure keep the cached keys (an IdP outage is survivable).

        The fetch time is recorded when the fetch ends, so callers arriving meanwhile wait on
        the lock and then see the new keys instead of being refused.
        """
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        try:
            keys = _signing_keys(await self._download())
        except (aiohttp.ClientError, TimeoutError, ValueError, TypeError, AttributeError, KeyError,
                jwt.PyJWTError) as exc:
            log.warning("jwks_fetch_failed", url=self.url, error=type(exc).__name__,
                        cached_keys=len(self._keys))
            return
        finally:
            self._fetched_at = self.clock()
        self._keys = {k.key_id or f"#{i}": k for i, k in enumerate(keys)}
        log.info("jwks_fetched", url=self.url, keys=len(self._keys))

    async def _download(self) -> bytes:
        assert self._session is not None
        body = bytearray()
        async with self._session.get(self.url) as response:
            response.raise_for_status()
            async for chunk in response.content.iter_chunked(65536):
                body += chunk
                if len(body) > MAX_JWKS_BYTES:
                    raise ValueError("JWKS document too large")
        return bytes(body)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def _span_attributes(url: str) -> dict[str, str | int]:
    """Where the keys come from, without a query string or credentials the URL might carry."""
    parts = urlsplit(url)
    attributes: dict[str, str | int] = {"http.request.method": "GET", "url.full": f"{parts.scheme}://"
                                        f"{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}"}
    if parts.hostname:
        attributes["server.address"] = parts.hostname
    return attributes


def _signing_keys(document: bytes) -> list[jwt.PyJWK]:
    """The keys of a JWKS document meant for signatures (`use` absent or "sig")."""
    data = json.loads(document)
    keys = [key for key in data["keys"] if key.get("use", "sig") == "sig"]
    return jwt.PyJWKSet.from_dict({"keys": keys}).keys  # none usable: PyJWKSetError, the cached keys stay
