"""The one decision: whether a caller is listed an item and may call it, and by which rule.

Lists and calls both ask `Access.decide`, so they cannot disagree. Rules run in order and the
first that applies decides; none: the tenant's default. What applies to a caller is worked
out once per caller (`TenantPolicy.access`): whether each rule names it, and each condition
that reads only the caller. Callers with the same outcomes share one `Access`, their policy
class, and so one pre-built view of the catalogue.

A condition that reads the request cannot be known when listing. There a conditional allow
lists the item (it may be callable) and a conditional deny is passed over (it may not apply);
the call then decides with the request in hand. An evaluation error counts against the caller:
a conditional allow does not apply, a conditional deny does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.policy.principal import Principal
from gateway.policy.rules import ALLOW, Item, Rule

MAX_CLASSES = 10_000
"""Policy classes kept per tenant policy; past it, the table starts again (callers are reclassified)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What the rules say of one item for one caller (and, at call time, one request)."""

    allowed: bool
    rule: Rule | None  # the deciding rule; None: the tenant's default
    conditional: bool = False  # listing: a condition on the request may still refuse the call
    unmet: Rule | None = None  # a conditional allow passed over because its condition did not hold

    @property
    def rule_name(self) -> str:
        return self.rule.name if self.rule is not None else "default"

    @property
    def overlay(self) -> Mapping[str, Any] | None:
        """The argument schemas the deciding rule lays over a tool's inputSchema."""
        return self.rule.arguments if self.allowed and self.rule is not None else None

    @property
    def reason(self) -> str:
        """Why a call was refused, in one word of a fixed set (a metrics label)."""
        if self.unmet is not None or (self.rule is not None and self.rule.when is not None):
            return "condition"
        return "rule" if self.rule is not None else "default"

    def refusal(self) -> str:
        """What the refused caller is told: the rule it did not satisfy (its own), never another caller's."""
        rule = self.unmet or self.rule
        if rule is not None and rule.message:
            return rule.message
        if rule is not None and rule.allows and rule.when is not None:
            return f"Not allowed by policy: this call does not meet the condition of rule {rule.name!r}"
        if rule is not None:
            return f"Not allowed by policy: rule {rule.name!r} refuses this call"
        return "Not allowed by policy"


class Access:
    """One policy class: the rules that apply to its callers, each marked if it reads the request."""

    __slots__ = ("applying", "default_allows", "key")

    def __init__(self, key: tuple[tuple[int, bool], ...], rules: tuple[Rule, ...], default_allows: bool) -> None:
        self.key = key  # (rule index, reads the request) for each rule that applies
        self.applying = tuple((rules[index], pending) for index, pending in key)
        self.default_allows = default_allows

    def decide(self, item: Item, request: Mapping[str, Any] | None = None,
               principal: Principal | None = None) -> Decision:
        """The decision on `item`: for a list without `request`, for a call with it (and its caller)."""
        conditional = False
        unmet: Rule | None = None
        caller: dict[str, Any] | None = None
        for rule, pending in self.applying:
            if not rule.covers(item):
                continue
            if pending:
                if request is None:  # listing: the call will decide
                    if rule.allows:
                        return Decision(True, rule, conditional=True)
                    conditional = True
                    continue
                assert rule.when is not None
                if caller is None:
                    caller = principal.cel_value() if principal is not None else {}
                holds = rule.when.holds(caller, dict(request))
                if not (holds if holds is not None else not rule.allows):
                    if rule.allows and unmet is None:
                        unmet = rule
                    continue
            return Decision(rule.allows, rule, conditional, unmet)
        return Decision(self.default_allows, None, conditional, unmet)

    @property
    def reads_requests(self) -> bool:
        """Whether any rule of this class is decided per call."""
        return any(pending for _, pending in self.key)


@dataclass(frozen=True, slots=True)
class TenantPolicy:
    """A tenant's rules (the gateway-wide ones first) and its default, compiled at config load."""

    rules: tuple[Rule, ...] = ()
    default: str = ALLOW
    classes: dict[tuple[tuple[int, bool], ...], Access] = field(default_factory=dict, compare=False, repr=False)

    @property
    def hides_nothing(self) -> bool:
        """No rule and an allowing default: every caller sees what the tenant's globs let through."""
        return not self.rules and self.default == ALLOW

    def access(self, principal: Principal) -> Access:
        """The caller's policy class: remembered on the principal, which the authenticator caches."""
        memo = principal.memo
        if memo and memo[0] is self:
            return memo[1]  # type: ignore[no-any-return]
        key = tuple(outcome for index, rule in enumerate(self.rules)
                    if (outcome := _outcome(index, rule, principal)) is not None)
        found = self.classes.get(key)
        if found is None:
            if len(self.classes) >= MAX_CLASSES:
                self.classes.clear()
            found = self.classes[key] = Access(key, self.rules, self.default == ALLOW)
        memo[:] = (self, found)
        return found

    def decide(self, principal: Principal, item: Item, arguments: Mapping[str, Any] | None = None, *,
               method: str | None = None) -> Decision:
        """The decision for `principal` on `item`: as listed without `arguments`, as called with them."""
        request = None if arguments is None else {"method": method or "", "name": item.name, "arguments": arguments}
        return self.access(principal).decide(item, request, principal)


def _outcome(index: int, rule: Rule, principal: Principal) -> tuple[int, bool] | None:
    """How rule `index` applies to a caller: not at all (None), outright, or per call (reads the request)."""
    if not rule.callers.match(principal):
        return None
    if rule.when is None:
        return index, False
    if rule.when.reads_request:
        return index, True
    holds = rule.when.holds(principal.cel_value())
    applies = holds if holds is not None else not rule.allows  # an error counts against the caller
    return (index, False) if applies else None
