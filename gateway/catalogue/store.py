"""Where backend snapshots live between refreshes: this process (memory) or Redis (shared)."""

from __future__ import annotations

from typing import Protocol

from gateway.catalogue.merge import BackendSnapshot


class SnapshotStore(Protocol):
    async def load(self) -> dict[str, BackendSnapshot]:
        """Every stored snapshot, by backend name."""

    async def save(self, snapshot: BackendSnapshot) -> None: ...


class MemorySnapshotStore:
    """The embedded default: snapshots live and die with this process."""

    def __init__(self) -> None:
        self._snapshots: dict[str, BackendSnapshot] = {}

    async def load(self) -> dict[str, BackendSnapshot]:
        return dict(self._snapshots)

    async def save(self, snapshot: BackendSnapshot) -> None:
        self._snapshots[snapshot.backend] = snapshot
