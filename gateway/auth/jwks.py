"""A JWKS document fetched with aiohttp, cached, refetched on an unknown `kid` (rate-limited)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import aiohttp
import jwt
import structlog

log = structlog.get_logger("gateway.auth")

MIN_REFETCH_SECONDS = 30.0
"""An unknown kid triggers at most one fetch this often, so forged kids cannot flood the IdP."""

MAX_JWKS_BYTES = 512 * 1024


class JwksCache:
    def __init__(self, url: str, *, clock: Callable[[], float] = time.monotonic,
                 min_refetch_seconds: float = MIN_REFETCH_SECONDS, timeout: float = 5.0) -> None:
        self.url = url
        self.clock = clock
        self.min_refetch_seconds = min_refetch_seconds
        self.timeout = timeout
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._lock = asyncio.Lock()
        self._session: aiohttp.ClientSession | None = None

    async def get(self, kid: str | None) -> jwt.PyJWK | None:
        """The key for `kid` (or the only key when the token names none), or None."""
        key = self._find(kid)
        if key is None and self._may_fetch():
            async with self._lock:
                if self._find(kid) is None and self._may_fetch():
                    await self._fetch()
            key = self._find(kid)
        return key

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
            keys = jwt.PyJWKSet.from_json((await self._download()).decode()).keys
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
