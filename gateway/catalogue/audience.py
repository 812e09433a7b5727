"""Who hears of a list change: the tenants it may concern and, within them, the callers whose own
view changed (a tenant's rules may show a changed item to some of its callers and not to others).

An `Audience` is handed to the transports with each `list_changed` they fan out: every client of
`tenants` is asked `sees(tenant, principal)`, answered once per policy class and cached. A tenant
without rules answers yes for all its clients, as before per-caller policy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from gateway.config import TenantConfig
from gateway.policy import Access, Item, Principal

Sees = Callable[[str, Principal | None], bool]
"""Whether the client of (tenant, principal) is to hear of a change."""


@dataclass(slots=True)
class Audience:
    """The clients one list_changed is for."""

    tenants: set[str]
    sees: Sees | None = None  # None: every client of `tenants`

    def admits(self, tenant: str, principal: Principal | None) -> bool:
        return tenant in self.tenants and (self.sees is None or self.sees(tenant, principal))


@dataclass(slots=True)
class ChangedItems:
    """The items of one kind a catalogue change touched, per tenant whose globs let them through."""

    tenants: Mapping[str, TenantConfig]
    items: dict[str, list[Item]] = field(default_factory=dict)
    _answers: dict[tuple[str, Access], bool] = field(default_factory=dict)

    def audience(self) -> Audience:
        return Audience(set(self.items), self._sees)

    def _sees(self, tenant: str, principal: Principal | None) -> bool:
        config = self.tenants.get(tenant)
        if config is None or principal is None or not _filters(config):
            return True
        access = config.policy.access(principal)
        answer = self._answers.get((tenant, access))
        if answer is None:
            answer = self._answers[(tenant, access)] = any(access.decide(item).allowed for item in self.items[tenant])
        return answer


def _filters(tenant: TenantConfig) -> bool:
    """Whether the tenant's rules can hide anything from any caller."""
    return bool(tenant.policy.rules) or tenant.policy.default != "allow"


class ReloadAudience:
    """For a reload: the clients whose view of a kind differs between the old config and the new one.

    `differing(tenant, principal)` builds the caller's old and new views (once per pair of classes)
    and names the list_changed methods of the kinds that differ.
    """

    def __init__(self, tenants: Sequence[str], differing: Callable[[str, Principal | None], frozenset[str]]) -> None:
        self.tenants = set(tenants)
        self._differing = differing

    def audience(self, method: str) -> Audience:
        return Audience(set(self.tenants), lambda tenant, principal: method in self._differing(tenant, principal))
