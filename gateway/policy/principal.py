"""Who is asking: an authenticated caller, as the token or API key described it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller. `expires_at` (epoch seconds) bounds how long it may be cached.

    `groups` come from the token's groups claim (`auth.jwt.groups_claim`) or an API key's
    `groups`; `claims` are the token's whole payload (empty for API keys), read by policy
    conditions. `memo` holds what the policy worked out for this caller (its policy class), so a
    cached principal is classified once, not on every request. `access_token` is the caller's own
    OAuth access token (one an authorization server signed), kept only so it can be exchanged for a
    backend's token (RFC 8693): it is never forwarded, never printed (not in the repr), never compared,
    and not among the conditions' values.
    """

    tenant: str
    subject: str
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = None
    groups: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = field(default_factory=dict, compare=False)
    memo: list[Any] = field(default_factory=list, compare=False, repr=False)
    access_token: str | None = field(default=None, compare=False, repr=False)

    def cel_value(self) -> dict[str, Any]:
        """The `principal` variable of policy conditions."""
        return {"tenant": self.tenant, "subject": self.subject, "groups": sorted(self.groups),
                "scopes": sorted(self.scopes), "claims": dict(self.claims)}
