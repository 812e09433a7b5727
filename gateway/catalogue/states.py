"""Each backend's state as this replica sees it (up, stale, down), and one log line per change."""

from __future__ import annotations

import structlog

log = structlog.get_logger("gateway.catalogue")

BACKEND_STATES = {"ok": "up", "stale": "stale", "down": "down"}
"""Snapshot status → the state word of `backend_state_changed` lines (stale: serving old tools)."""


class BackendStates:
    """Writes one `backend_state_changed` line per transition of a backend, the first `up` too."""

    def __init__(self) -> None:
        self._states: dict[str, str] = {}

    def observe(self, backend: str, status: str) -> None:
        """A snapshot of `backend` with this status was installed."""
        state = BACKEND_STATES.get(status, status)
        previous = self._states.get(backend)
        if previous == state:
            return
        self._states[backend] = state
        emit = log.info if state == "up" else log.warning
        emit("backend_state_changed", backend=backend, state=state, previous=previous)
