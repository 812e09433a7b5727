"""Policy rules: who (callers) may or may not reach what (items), and when. Pure.

A rule names its callers by globs on the subject, the groups, the scopes and, for gateway-wide
rules, the tenant: every key it gives must match (a caller matches a key when one of its values
matches one of the key's globs). It names items by globs on exposed names (`tools`, `prompts`)
and gateway URIs (`resources`, which covers URI templates too), and by `backends`: an item
matches when its kind's key matches (no item key at all: every kind) and its backend is listed
(no `backends`: any).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from gateway.policy.conditions import Condition
from gateway.policy.principal import Principal

ALLOW, DENY = "allow", "deny"
EFFECTS = (ALLOW, DENY)
KINDS = ("tools", "prompts", "resources", "templates")
"""What an item can be; a rule's `resources` names resources and URI templates alike."""
SELECTOR_OF = {"tools": "tools", "prompts": "prompts", "resources": "resources", "templates": "resources"}


@dataclass(frozen=True, slots=True)
class Item:
    """Something a caller may be listed and may call: a tool, prompt, resource or URI template."""

    kind: str  # one of KINDS
    name: str  # the exposed name, gateway URI or URI template
    backend: str


def _any_match(values: Iterable[str], globs: tuple[str, ...]) -> bool:
    return any(fnmatchcase(value, glob) for value in values for glob in globs)


@dataclass(frozen=True, slots=True)
class Callers:
    """Whom a rule is for; a key left out (None) does not narrow it."""

    subjects: tuple[str, ...] | None = None
    groups: tuple[str, ...] | None = None
    scopes: tuple[str, ...] | None = None
    tenants: tuple[str, ...] | None = None  # gateway-wide rules: the tenants they apply in

    def match(self, principal: Principal) -> bool:
        if self.subjects is not None and not _any_match((principal.subject,), self.subjects):
            return False
        if self.groups is not None and not _any_match(principal.groups, self.groups):
            return False
        if self.scopes is not None and not _any_match(principal.scopes, self.scopes):
            return False
        return self.tenants is None or _any_match((principal.tenant,), self.tenants)

    def keys(self) -> dict[str, tuple[str, ...]]:
        """The keys given, by name."""
        return {name: globs for name in ("subjects", "groups", "scopes", "tenants")
                if (globs := getattr(self, name)) is not None}


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule; `where` is its config key path (its name when it has none of its own)."""

    name: str
    where: str
    effect: str = ALLOW
    callers: Callers = Callers()
    tools: tuple[str, ...] | None = None
    prompts: tuple[str, ...] | None = None
    resources: tuple[str, ...] | None = None
    backends: tuple[str, ...] | None = None
    when: Condition | None = None
    arguments: Mapping[str, Any] | None = None  # JSON Schema per argument, laid over a tool's inputSchema
    message: str | None = None  # what a refused caller is told, instead of the generic words

    @property
    def allows(self) -> bool:
        return self.effect == ALLOW

    def selectors(self) -> dict[str, tuple[str, ...]]:
        """The item keys given (tools, prompts, resources), by name."""
        return {name: globs for name in ("tools", "prompts", "resources")
                if (globs := getattr(self, name)) is not None}

    def covers(self, item: Item) -> bool:
        """Whether the rule names `item` (whoever asks)."""
        if self.backends is not None and item.backend not in self.backends:
            return False
        if self.tools is None and self.prompts is None and self.resources is None:
            return True
        globs = getattr(self, SELECTOR_OF[item.kind])
        return globs is not None and any(fnmatchcase(item.name, glob) for glob in globs)
