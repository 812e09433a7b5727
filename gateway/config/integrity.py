"""The `integrity` settings: what the gateway does when a backend changes what the model reads.

Per backend (`backends[].integrity`): whether definitions are pinned, and what happens to a changed
item, a new one, and one hiding invisible Unicode. Gateway-wide (`integrity`): the lockfile of
approved fingerprints. See gateway.catalogue.integrity and docs/how-to/tool-pinning.md.
"""

from __future__ import annotations

from dataclasses import dataclass

INTEGRITY_MODES = ("off", "record", "hold")
"""off: no fingerprints; record: changes are logged and counted; hold: a changed item waits for approval."""
NEW_ITEMS = ("allow", "hold")
"""What `hold` mode does with an item the backend had not listed before."""
INVISIBLE_ACTIONS = ("clean", "hold", "allow")
"""Invisible and direction-changing Unicode in titles and descriptions: removed, held, or served as it is."""


@dataclass(frozen=True, slots=True)
class BackendIntegrity:
    mode: str = "record"  # one of INTEGRITY_MODES
    new_items: str = "allow"  # one of NEW_ITEMS (hold mode only)
    invisible: str = "clean"  # one of INVISIBLE_ACTIONS

    @property
    def holds(self) -> bool:
        return self.mode == "hold"


@dataclass(frozen=True, slots=True)
class IntegrityConfig:
    lockfile: str | None = None  # approved fingerprints, written by `mcp-gateway pins export`
