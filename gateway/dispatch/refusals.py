"""Calls the policy refuses: what the request log and the metrics are told.

A refused call of a listed item names its deciding rule in the request line (`rule`, `denied`)
and counts in `mcpgw_policy_denied_total`. A call of an item the caller is not listed gets the
same answer as one of an item nobody has; only the log and the metrics tell them apart, by
asking the one decision again on the tenant's view without rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.catalogue.callers import Refusal
from gateway.catalogue.listings import Kind
from gateway.catalogue.refresher import CatalogueService
from gateway.policy import Decision, Item
from gateway.tenancy import RequestContext

if TYPE_CHECKING:
    from gateway.metrics import Metrics

DENIED = "denied"
"""The outcome of a request the policy refused."""


class Refusals:
    def __init__(self, *, catalogue: CatalogueService, metrics: Metrics | None = None) -> None:
        self.catalogue = catalogue
        self.metrics = metrics

    def refused(self, ctx: RequestContext, refusal: Refusal) -> None:
        self._report(ctx, refusal.decision, refusal.reason)

    def hidden_tool(self, ctx: RequestContext, name: Any) -> None:
        """An unknown tool name: counted when the caller's rules hid a tool its tenant has."""
        if ctx.tenant.policy.hides_nothing:  # no rules: nothing to count, and no second view to build
            return
        entry = self.catalogue.view(ctx.tenant).by_name.get(name) if isinstance(name, str) else None
        if entry is not None:
            self._hidden(ctx, Item("tools", entry.exposed, entry.backend))

    def hidden_item(self, ctx: RequestContext, kind: Kind, key: Any) -> None:
        """An unknown prompt, resource or template: counted when the caller's rules hid one its tenant has."""
        if not isinstance(key, str) or ctx.tenant.policy.hides_nothing:
            return
        view = self.catalogue.view(ctx.tenant)
        entry = view.listing(kind).by_key.get(key)
        if entry is not None:
            self._hidden(ctx, Item(kind.name, key, entry.backend))
        elif kind.name == "resources" and (route := view.resolve_uri(key)) is not None:
            self._hidden(ctx, Item(kind.name, key, route.backend))

    def _hidden(self, ctx: RequestContext, item: Item) -> None:
        decision = ctx.tenant.policy.decide(ctx.principal, item)
        if not decision.allowed:
            self._report(ctx, decision, decision.reason)

    def _report(self, ctx: RequestContext, decision: Decision, reason: str) -> None:
        ctx.outcome = DENIED
        ctx.extra["rule"] = decision.rule_name
        ctx.extra["denied"] = reason
        if self.metrics is not None:
            self.metrics.policy_denied(ctx.tenant.name, reason)
