"""One catalogue build: the snapshots screened (catalogue.pins), merged, and the new collisions logged.

The catalogue keeps the backends' own snapshots (what they listed, for refreshes and admins) while
its entries, listings and version come from the screened ones (what clients are served).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import structlog

from gateway.catalogue.integrity import Integrity
from gateway.catalogue.listings import BY_NAME
from gateway.catalogue.merge import BackendEntries, BackendSnapshot, Catalogue, ToolEntry, backend_entries, merge

log = structlog.get_logger("gateway.catalogue")


def build(order: Sequence[tuple[str, str]], snapshots: Mapping[str, BackendSnapshot], separator: str,
          memo: dict[str, BackendEntries], integrity: Integrity) -> Catalogue:
    screened = integrity.screen_all(snapshots)
    catalogue = merge(order, {name: s.snapshot for name, s in screened.items()}, separator, memo)
    held: dict[str, ToolEntry] = {}
    held_listed: dict[str, dict[str, str]] = {}
    for backend, namespace in order:
        found = screened.get(backend)
        if found is not None and found.held_tools:
            named = backend_entries(backend, namespace, separator, replace(found.snapshot, tools=found.held_tools))
            held.update((entry.exposed, entry) for entry in named.entries if entry.exposed not in catalogue.by_name)
        for item in found.held if found is not None else ():
            if item.key[0] in BY_NAME:
                exposed = BY_NAME[item.key[0]].exposed(namespace, separator, item.key[1])
                held_listed.setdefault(item.key[0], {})[exposed] = backend
    return replace(catalogue, snapshots=dict(snapshots), held=held, held_listed=held_listed)


def log_collisions(old: Catalogue, new: Catalogue) -> None:
    """Each collision the new catalogue has and the old one had not, once."""
    for collision in new.collisions:
        if collision not in old.collisions:
            log.warning("tool_name_collision", tool=collision.exposed, winner=collision.winner,
                        excluded=collision.loser)
    for kind, listing in new.listings.items():
        before = old.listings.get(kind)
        for key, winner, loser in listing.collisions:
            if before is None or (key, winner, loser) not in before.collisions:
                log.warning("listing_collision", kind=kind, key=key, winner=winner, excluded=loser)
