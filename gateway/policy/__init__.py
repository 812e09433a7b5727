"""Per-caller policy: who is asking (`Principal`), the rules that say what each caller is listed
and may call (`Rule`, compiled per tenant into a `TenantPolicy`), and the one decision both
lists and calls take from them (`TenantPolicy.decide`, `Access.decide`).

The package is pure and sits low: the config compiles rules with it, the catalogue builds
per-class views with it, the dispatcher asks it at call time.
"""

from gateway.policy.conditions import Condition, ConditionError
from gateway.policy.decision import Access, Decision, TenantPolicy
from gateway.policy.principal import Principal
from gateway.policy.rules import ALLOW, DENY, EFFECTS, KINDS, Callers, Item, Rule

__all__ = ["ALLOW", "DENY", "EFFECTS", "KINDS", "Access", "Callers", "Condition", "ConditionError", "Decision",
           "Item", "Principal", "Rule", "TenantPolicy"]
