"""What `mcp-gateway check-config` says of rules that load but cannot do what they seem to: a rule
an earlier one always pre-empts (shadowed), and globs that no exposed name or URI can match.

Both are judged from the config alone (no backend is asked), and on the safe side: a glob with
`?` or `[` is never said to cover another, and a name glob is said to match nothing only when no
backend's namespace prefix fits its literal start.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from fnmatch import fnmatchcase

from gateway.policy.rules import Rule

WILDCARDS_ONLY_STAR = ("?", "[")


def shadowed(rules: Sequence[Rule]) -> Iterator[tuple[Rule, Rule]]:
    """(rule, the earlier rule that always decides first) for each rule that can never apply."""
    for index, rule in enumerate(rules):
        if _names_nothing(rule):
            continue
        earlier = next((e for e in rules[:index] if _covers(e, rule)), None)
        if earlier is not None:
            yield rule, earlier


def unmatched_globs(rule: Rule, namespaces: dict[str, str], separator: str) -> Iterator[tuple[str, str]]:
    """(key path, glob) for each item glob of `rule` that no name of the backends it may reach can match.

    `namespaces` maps each backend the rule's tenant uses to its namespace.
    """
    reachable = [ns for backend, ns in namespaces.items() if rule.backends is None or backend in rule.backends]
    for key, globs in rule.selectors().items():
        joint = "+" if key == "resources" else separator
        for i, glob in enumerate(globs):
            if not any(_could_start_with(glob, ns + joint) for ns in reachable if ns) and "" not in reachable:
                yield f"{rule.where}.{key}[{i}]", glob


def _names_nothing(rule: Rule) -> bool:
    """A rule whose item keys are all empty lists names no item at all (check-config says so elsewhere)."""
    selectors = rule.selectors()
    return bool(selectors) and not any(selectors.values())


def _covers(earlier: Rule, later: Rule) -> bool:
    """Whether `earlier` applies to every caller and item `later` names, whatever the request."""
    if earlier.when is not None:
        return False
    if not all(_globs_cover(globs, getattr(later.callers, key)) for key, globs in earlier.callers.keys().items()):
        return False
    if earlier.backends is not None and (later.backends is None or not set(later.backends) <= set(earlier.backends)):
        return False
    outer, inner = earlier.selectors(), later.selectors()
    if not outer:
        return True
    return bool(inner) and all(key in outer and _globs_cover(outer[key], globs) for key, globs in inner.items())


def _globs_cover(outer: tuple[str, ...], inner: tuple[str, ...] | None) -> bool:
    """Whether every string one of `inner` matches, one of `outer` matches too."""
    if inner is None:
        return False
    return all(any(_glob_covers(o, i) for o in outer) for i in inner)


def _glob_covers(outer: str, inner: str) -> bool:
    if outer == inner:
        return True
    if any(c in outer for c in WILDCARDS_ONLY_STAR):
        return False  # only `*` is reasoned about
    return fnmatchcase(inner, outer)  # `inner`'s wildcards, read as literals, are what `*` absorbs


def _could_start_with(glob: str, prefix: str) -> bool:
    """Whether `glob` may match some string that starts with `prefix`."""
    literal = glob
    for i, c in enumerate(glob):
        if c in "*?[":
            literal = glob[:i]
            break
    return literal.startswith(prefix) or prefix.startswith(literal)
