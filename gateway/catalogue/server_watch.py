"""Virtual servers' withdrawals as they happen: each logged once and counted, the recent ones kept.

Whenever the catalogue changes (and when an admin asks), every server's items are checked against it
(catalogue.servers.item_states): an item newly withdrawn is logged at warning with its reason and
counted in `mcpgw_server_items_withdrawn_total{server,reason}`; one that stands again is logged too.
An item is never re-pointed: it names its source by backend and the backend's own name only.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from gateway.catalogue.merge import Catalogue
from gateway.catalogue.servers import ItemState, item_states
from gateway.config.server_model import VirtualServer
from gateway.metrics.servers import ServerMetrics

log = structlog.get_logger("gateway.servers")

RECENT = 100
"""Withdrawals and restorations kept for the admin view."""


class ServerWatch:
    def __init__(self, *, servers: Callable[[], Mapping[str, VirtualServer]], metrics: ServerMetrics | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.servers = servers  # the config in force (a reload may change them)
        self.metrics = metrics
        self.clock = clock
        self.withdrawn: dict[str, dict[tuple[str, str], ItemState]] = {}
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT)

    async def changed(self, old: Catalogue, new: Catalogue) -> None:
        """A catalogue listener (CatalogueService.subscribe)."""
        self.check(new)

    def check(self, catalogue: Catalogue) -> dict[str, dict[tuple[str, str], ItemState]]:
        """Every server's items that do not stand in `catalogue`; changes since the last check are logged."""
        now: dict[str, dict[tuple[str, str], ItemState]] = {}
        for name, server in self.servers().items():
            states = now[name] = item_states(server, catalogue)
            before = self.withdrawn.get(name, {})
            for key, state in states.items():
                if state.withdrawn and before.get(key) != state:
                    self._event(name, state, "withdrawn")
            for key, state in before.items():
                if state.withdrawn and key not in states:
                    self._event(name, state, "restored")
        self.withdrawn = now
        return now

    def _event(self, server: str, state: ItemState, what: str) -> None:
        fields = {"server": server, "kind": state.kind, "item": state.name, "reason": state.reason,
                  "detail": state.detail}
        if what == "withdrawn":
            log.warning("server_item_withdrawn", **fields)
            if self.metrics is not None:
                self.metrics.withdrawn(server, state.reason)
        else:
            log.info("server_item_restored", **fields)
        self.recent.append({"at": self.clock(), "event": what, **fields})

    def report(self, catalogue: Catalogue) -> list[dict[str, Any]]:
        """Each server, its items and their state (`GET /admin/servers`)."""
        states = self.check(catalogue)
        rows = []
        for name, server in self.servers().items():
            mine = states.get(name, {})
            kinds = (("tools", server.tools), ("prompts", server.prompts), ("resources", server.resources),
                     ("templates", server.templates))
            items = [_item(kind, item, mine.get((kind, item.name))) for kind, listed in kinds for item in listed]
            rows.append({"name": name, "title": server.title, "tenants": list(server.tenants), "items": items,
                         "recent": [event for event in self.recent if event["server"] == name]})
        return rows


def _item(kind: str, item: Any, state: ItemState | None) -> dict[str, Any]:
    source = item.tool if kind == "tools" else item.prompt if kind == "prompts" else item.source
    row = {"kind": kind, "name": item.name, "backend": item.backend, "source": source,
           "state": "serving" if state is None else ("pending" if not state.withdrawn else "withdrawn")}
    if kind in ("tools", "prompts") and item.fixed:
        row["fixed"] = sorted(item.fixed)  # the names only: a fixed value may be a secret
    if state is not None:
        row.update(reason=state.reason, detail=state.detail)
    return row
