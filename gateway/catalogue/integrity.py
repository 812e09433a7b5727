"""Tool pinning: each backend's items screened against the approved fingerprints, changes reported.

Two moments, kept apart for speed and for replicas:

- `observe` runs where a backend was just listed (one replica, once per refresh): it compares the
  new definitions with the approved ones, logs each change with a readable diff, counts it, and
  writes what follows to the pin store (the first listing of a backend is approved as it is;
  `record` mode approves every change; `hold` mode records the held definition for review).
- `screen` runs at every catalogue build on every replica (memoized per snapshot and approvals):
  it decides from the approvals alone what clients are served (gateway.catalogue.pins).

Nothing here runs per request.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import structlog

from gateway.catalogue.fingerprints import ItemKey, definitions, diff, key_text, short
from gateway.catalogue.lockfile import read_lockfile
from gateway.catalogue.merge import BackendSnapshot
from gateway.catalogue.pins import HELD_CHANGED, HELD_NEW, Held, Reading, Screened, screen
from gateway.catalogue.pinstore import Pin, Pins, PinStore
from gateway.config import Config
from gateway.config.integrity import BackendIntegrity
from gateway.metrics.integrity import IntegrityMetrics
from gateway.store.health import StoreUnavailable

log = structlog.get_logger("gateway.catalogue")

RECENT_CHANGES = 200
"""Changes this replica saw, kept for the admin view."""
FIRST_SEEN, RECORDED = "first-seen", "record"
"""Who approved a definition the gateway approved itself: at a backend's first listing, or in record mode."""

class Integrity:
    def __init__(self, *, config: Config, store: PinStore, clock: Callable[[], float] = time.time,
                 metrics: IntegrityMetrics | None = None) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self.lockfile = read_lockfile(config.integrity.lockfile)
        self.approved: dict[str, dict[ItemKey, str]] = {}  # the store's approved fingerprints, as last read
        self.held: dict[str, tuple[Held, ...]] = {}  # by backend, as of the last build
        self.cleaned: dict[str, Mapping[ItemKey, tuple[str, ...]]] = {}
        self.changes: deque[dict[str, Any]] = deque(maxlen=RECENT_CHANGES)
        self._readings: dict[str, tuple[str, Reading]] = {}
        self._screened: dict[str, tuple[tuple[object, ...], Screened]] = {}
        self._stamps: dict[str, int] = {}  # per backend, moved on whenever its approvals change

    def rules(self, backend: str) -> BackendIntegrity:
        found = self.config.backend(backend)
        return found.integrity if found is not None else BackendIntegrity()

    def reading(self, snapshot: BackendSnapshot, found: Mapping[ItemKey, Any] | None = None) -> Reading:
        """`found`: the snapshot's definitions, when the caller has decoded them already."""
        known = self._readings.get(snapshot.backend)
        if known is None or known[0] != snapshot.version:
            known = self._readings[snapshot.backend] = (snapshot.version, Reading.of(snapshot, found))
        return known[1]

    async def baseline(self, backend: str) -> Pins:
        """The approved definitions: the store's, else the lockfile's (read when needed: they are large)."""
        return {**self.lockfile.get(backend, {}), **await self.store.approved(backend)}

    def approved_prints(self, backend: str) -> dict[ItemKey, frozenset[str]] | None:
        """Each item's approved fingerprints (lockfile and store alike); None before any approval."""
        lock, stored = self.lockfile.get(backend, {}), self.approved.get(backend, {})
        if not lock and not stored:
            return None
        return {key: frozenset(p for p in (lock[key].fingerprint if key in lock else None, stored.get(key)) if p)
                for key in lock.keys() | stored.keys()}

    # ---------------------------------------------------------------- every build, every replica

    def screen(self, snapshot: BackendSnapshot) -> Screened:
        rules = self.rules(snapshot.backend)
        if (rules.mode == "off" and rules.invisible == "allow") or snapshot.status == "down":
            return Screened(snapshot)
        memo = (snapshot.version, rules, self._stamps.get(snapshot.backend, 0))
        known = self._screened.get(snapshot.backend)
        if known is None or known[0] != memo:
            approved = self.approved_prints(snapshot.backend) if rules.mode != "off" else None
            known = self._screened[snapshot.backend] = (memo, screen(snapshot, rules, self.reading(snapshot),
                                                                     approved))
        return known[1]

    def screen_all(self, snapshots: Mapping[str, BackendSnapshot]) -> dict[str, Screened]:
        screened = {name: self.screen(snapshot) for name, snapshot in snapshots.items()}
        self.held = {name: s.held for name, s in screened.items() if s.held}
        self.cleaned = {name: s.cleaned for name, s in screened.items() if s.cleaned}
        if self.metrics is not None:
            self.metrics.held({name: len(held) for name, held in self.held.items()})
        return screened

    async def load(self, backend: str) -> None:
        """Read the backend's approvals again (another replica or an admin may have changed them)."""
        try:
            approved = {key: pin.fingerprint for key, pin in (await self.store.approved(backend)).items()}
        except StoreUnavailable:
            log.warning("pins_unreadable", backend=backend)  # the approvals last read stay in force
            return
        if approved != self.approved.get(backend):
            self.approved[backend] = approved
            self._stamps[backend] = self._stamps.get(backend, 0) + 1  # its screening is done again

    # ---------------------------------------------------------------- after a listing, one replica

    async def observe(self, previous: BackendSnapshot | None, snapshot: BackendSnapshot) -> None:
        """Report and record what changed in a backend's fresh listing."""
        rules = self.rules(snapshot.backend)
        same = previous is not None and (previous.version, previous.status) == (snapshot.version, "ok")
        if snapshot.status != "ok" or same:
            return
        found = definitions(snapshot)
        reading = self.reading(snapshot, found)
        for key, points in reading.hidden.items():
            log.warning("catalogue_hidden_unicode", backend=snapshot.backend, item=key_text(key),
                        code_points=list(points), action={"clean": "cleaned", "hold": "held"}.get(rules.invisible,
                                                                                                  "served"))
        if rules.mode == "off":
            return
        await self.load(snapshot.backend)
        try:
            before = await self.baseline(snapshot.backend)
            if not before:
                await self._first_seen(snapshot.backend, reading, found, rules)
                return
            await self._compare(snapshot.backend, rules, (reading, found), before, previous)
        except StoreUnavailable:
            log.warning("pins_not_saved", backend=snapshot.backend)  # the next refresh tries again
        await self.load(snapshot.backend)

    async def _first_seen(self, backend: str, reading: Reading, found: Mapping[ItemKey, Any],
                          rules: BackendIntegrity) -> None:
        """Trust on first use: a backend with no approvals at all gets its current definitions approved."""
        pins = {key: _pin(reading, found, key, FIRST_SEEN, self.clock()) for key in reading.prints
                if not (rules.invisible == "hold" and key in reading.hidden)}
        await self.store.approve(backend, pins)
        log.info("catalogue_pinned", backend=backend, items=len(pins))

    async def _compare(self, backend: str, rules: BackendIntegrity, read: tuple[Reading, Mapping[ItemKey, Any]],
                       before: Pins, previous: BackendSnapshot | None) -> None:
        reading, found = read
        now = self.clock()
        prints = self.approved_prints(backend) or {}
        changed = [key for key in reading.prints if key in prints and reading.prints[key] not in prints[key]]
        new = [key for key in reading.prints if key not in prints]
        earlier = self.reading(previous).prints if previous is not None and previous.status == "ok" else {}
        removed = [key for key in earlier if key not in reading.prints]
        already = await self.store.held(backend) if rules.holds else {}
        holding = {key for key in changed if rules.holds} | {key for key in new if rules.holds
                                                               and rules.new_items == "hold"}
        for key in changed + new:
            if key in holding and key in already and already[key].fingerprint == reading.prints[key]:
                continue  # reported when it was first held
            self._report(backend, key, HELD_CHANGED if key in changed else HELD_NEW, before.get(key),
                         found[key], "held" if key in holding else "recorded")
        for key in removed:
            self._report(backend, key, "removed", before.get(key), None, "recorded")
        await self.store.approve(backend, {key: _pin(reading, found, key, RECORDED, now) for key in (*changed, *new)
                                           if key not in holding and key not in reading.hidden})
        await self.store.hold(backend, {key: _pin(reading, found, key, "", now, HELD_CHANGED if key in changed
                                                  else HELD_NEW)
                                        for key in holding if key not in already
                                        or already[key].fingerprint != reading.prints[key]})
        await self.store.unhold(backend, [key for key in already if key not in holding])

    def _report(self, backend: str, key: ItemKey, change: str, old: Pin | None, new: Any, action: str) -> None:
        lines = diff(old.definition if old is not None else {}, new if new is not None else {})
        log.warning("catalogue_item_changed", backend=backend, item=key_text(key), change=change, action=action,
                    diff=short(lines))
        self.changes.appendleft({"at": self.clock(), "backend": backend, "item": key_text(key), "change": change,
                                 "action": action, "diff": lines})
        if self.metrics is not None:
            self.metrics.changed(backend)

    # ---------------------------------------------------------------- reviews

    def held_items(self) -> Iterable[Held]:
        for held in self.held.values():
            yield from held


def _pin(reading: Reading, found: Mapping[ItemKey, Any], key: ItemKey, by: str, at: float, reason: str = "") -> Pin:
    return Pin(reading.prints[key], found[key], at, by, reason)
