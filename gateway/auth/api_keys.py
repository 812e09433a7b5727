"""API keys: configured as sha256 hashes, checked in constant time."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

from gateway.config import ApiKeyConfig
from gateway.tenancy import Principal


class ApiKeyIndex:
    def __init__(self, keys: Sequence[ApiKeyConfig]) -> None:
        self._keys = [(bytes.fromhex(k.sha256), k) for k in keys]

    def lookup(self, token: str) -> Principal | None:
        """The principal of a known key; every configured hash is compared, match or not."""
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        found: ApiKeyConfig | None = None
        for expected, key in self._keys:
            if hmac.compare_digest(digest, expected):
                found = key
        if found is None:
            return None
        return Principal(found.tenant, found.subject, frozenset(found.scopes), groups=frozenset(found.groups))
