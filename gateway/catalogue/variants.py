"""Tools a backend lists to some clients only: gated on what the client declared, or on its era.

Real servers list some tools only to clients that declared a capability (the reference "everything"
server offers `trigger-sampling-request` to clients with `sampling` only), and a dual-era backend may
list other tools at 2026 than in a session. A client of the gateway must see exactly the tools the
backend would list to it directly, so the gateway lists each backend the ways clients can differ and
marks every tool with the `needs` of the clients it is listed to (a subset of a client's `traits`).

How (the cost, per refresh of a backend's tools): in each era the backend is spoken to in, one list
declaring nothing and one declaring every capability the gateway relays. Equal lists (most backends)
end it: one tools/list more than a single listing. Different lists are told apart with one list per
capability group (sampling, elicitation, roots): three more. A tool in the plain list needs nothing;
one that appears with a single group needs that group; one that appears only with all of them needs
all three. A tool listed only to clients that declared *less* is kept for all (the gateway cannot
tell such a backend's clients apart without listing every combination). The other way round, listing
once per capability set that the tenants' clients happen to declare, would list only what is used,
but a new client's first tools/list would wait for a listing, and every replica would have to agree
on the sets seen: the fixed probes cost a bounded few lists per refresh and no waiting.

A dual-era backend's two eras are compared the same way: a tool listed alike in both needs no era;
one listed in one era only, or differently, is kept per era, marked with that era's trait.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, Final

import orjson

from gateway.catalogue.merge import ERA_TRAITS, TASK_TRAIT, Tool
from gateway.protocol.capabilities import (
    ALL,
    ELICITATION_FORM,
    ELICITATION_URL,
    FROM_2026,
    NONE,
    ROOTS,
    SAMPLING,
    SAMPLING_CONTEXT,
    SAMPLING_TOOLS,
    SESSION_TASKS,
)

GROUPS: Final = {
    "sampling": frozenset({SAMPLING, SAMPLING_CONTEXT, SAMPLING_TOOLS}),
    "elicitation": frozenset({ELICITATION_FORM, ELICITATION_URL}),
    "roots": frozenset({ROOTS}),
}
"""Client capabilities as backends gate tools on them: a client has a group when it declared any of its flags."""
AT_2026: Final = "era.2026"
IN_SESSION: Final = "era.handshake"
assert {AT_2026, IN_SESSION} == ERA_TRAITS
HANDSHAKE, MODERN = "handshake", "2026"
ERA_TRAITS: Final = {HANDSHAKE: IN_SESSION, MODERN: AT_2026}
ERA_FLAGS: Final = {HANDSHAKE: NONE, MODERN: FROM_2026}
"""What a listing request carries to reach a dual-era backend in each era (upstream.http.eras)."""

ListTools = Callable[[frozenset[str]], Awaitable[tuple[Sequence[Tool], str]]]
"""Lists a backend's tools as a client with these flags would see them: the tools and their version."""

_traits: dict[tuple[frozenset[str], bool], frozenset[str]] = {}


def traits(flags: frozenset[str], modern: bool) -> frozenset[str]:
    """What a client with relayable `flags`, of the 2026 era or not, is listed tools for."""
    known = _traits.get((flags, modern))
    if known is None:
        groups = {group for group, members in GROUPS.items() if flags & members}
        if SESSION_TASKS in flags and not modern:  # a 2025-11-25 session that knows tasks (merge.TASK_TRAIT)
            groups.add(TASK_TRAIT)
        known = _traits[(flags, modern)] = frozenset({*groups, AT_2026 if modern else IN_SESSION})
    return known


def visible(tool: Tool, client: frozenset[str]) -> bool:
    return tool.needs <= client


async def variant_tools(list_tools: ListTools, eras: Callable[[], Sequence[str]],
                        per_client: Callable[[], bool]) -> tuple[tuple[Tool, ...], str]:
    """A backend's tools, each marked with the traits of the clients it is listed to, and their version.

    `eras` tells, once the first listing found it out, the eras the backend is spoken to in; `per_client`
    whether it can tell clients apart at all (a handshake-era stdio child was told everything once)."""
    plain = await list_tools(NONE)  # in the backend's era: a session if it has both
    if not per_client():
        return tuple(plain[0]), plain[1]
    session, session_version = await _gated(list_tools, NONE, plain)
    if not {HANDSHAKE, MODERN} <= set(eras()):
        return session, session_version
    modern, modern_version = await _gated(list_tools, ERA_FLAGS[MODERN])
    if _keys(session, marked=True) == _keys(modern, marked=True):  # alike (an SDK orders schema keys per era)
        return session, session_version
    return _by_era(session, modern), _joined(session_version, modern_version, "eras")


async def _gated(list_tools: ListTools, base: frozenset[str],
                 listed: tuple[Sequence[Tool], str] | None = None) -> tuple[tuple[Tool, ...], str]:
    """One era's tools: the plain list (`listed` if done), and what clients declaring more are listed besides."""
    plain, version = listed or await list_tools(base)
    full, full_version = await list_tools(base | ALL)
    if _keys(plain) == _keys(full):
        return tuple(plain), version
    seen = {_key(tool): tool for tool in plain}
    marked: dict[tuple[str, bytes], Tool] = dict(seen)
    versions = [version, full_version]
    for group, members in GROUPS.items():
        tools, group_version = await list_tools(base | members)
        versions.append(group_version)
        for tool in tools:
            marked.setdefault(_key(tool), replace(tool, needs=frozenset({group})))
    everything = frozenset(GROUPS)
    for tool in full:
        marked.setdefault(_key(tool), replace(tool, needs=everything))
    return tuple(marked.values()), _joined(*versions)


def _by_era(session: Iterable[Tool], modern: Iterable[Tool]) -> tuple[Tool, ...]:
    """Tools listed alike in both eras once; any other, in its era only."""
    both = {_marked_key(tool) for tool in session} & {_marked_key(tool) for tool in modern}
    merged = [tool for tool in session if _marked_key(tool) in both]
    for era, tools in ((HANDSHAKE, session), (MODERN, modern)):
        merged += [replace(tool, needs=tool.needs | {ERA_TRAITS[era]}) for tool in tools
                   if _marked_key(tool) not in both]
    return tuple(merged)


def _key(tool: Tool) -> tuple[str, bytes]:
    """A tool's identity across listings: its name and its JSON with sorted keys (two listings of one
    backend may order an object's keys differently, as the SDK does from one era to the other)."""
    return tool.name, orjson.dumps(orjson.loads(b"{" + tool.tail[1:]) if tool.tail != b"}" else {},
                                   option=orjson.OPT_SORT_KEYS)


def _marked_key(tool: Tool) -> tuple[str, bytes, frozenset[str]]:
    return (*_key(tool), tool.needs)


def _keys(tools: Iterable[Tool], *, marked: bool = False) -> list[Any]:
    return [_marked_key(tool) if marked else _key(tool) for tool in tools]


def _joined(*versions: str) -> str:
    """One version over several listings (the plain one first, so an ungated backend keeps its own)."""
    return hashlib.sha256("|".join(versions).encode()).hexdigest()[:16]
