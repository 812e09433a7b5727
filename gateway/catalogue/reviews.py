"""Reviewing held items: what changed, approve, reject. Shared by the admin endpoints and the CLI.

Every function works on a pin store alone (the CLI reaches Redis without a running gateway); the
held definition to approve is the one recorded when it was held, and an approval may name the
fingerprint reviewed, so what is approved is exactly what was read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import structlog

from gateway.catalogue.fingerprints import ItemKey, diff, key_text, parse_key
from gateway.catalogue.pinstore import Pin, Pins, PinStore

log = structlog.get_logger("gateway.catalogue")


class ReviewError(ValueError):
    """A review that cannot be done as asked (nothing held under that name, a fingerprint that moved on)."""


async def held_report(store: PinStore, backend: str, lockfile: Mapping[ItemKey, Pin]) -> list[dict[str, Any]]:
    """Each item held for review: why, its fingerprints, and the diff from the approved definition."""
    held, approved = await store.held(backend), {**lockfile, **await store.approved(backend)}
    report = []
    for key, pin in sorted(held.items()):
        before = approved.get(key)
        report.append({"backend": backend, "item": key_text(key), "reason": pin.reason, "held_at": pin.at,
                       "rejected": pin.rejected, "fingerprint": pin.fingerprint,
                       "approved_fingerprint": before.fingerprint if before is not None else None,
                       "diff": diff(before.definition if before is not None else {}, pin.definition)})
    return report


def chosen_items(names: Sequence[str]) -> list[ItemKey] | None:
    """Items named `KIND/NAME` (a bare name is a tool); none named: every held item. ReviewError when malformed."""
    if not names:
        return None
    try:
        return [parse_key(name if "/" in name else f"tools/{name}") for name in names]
    except ValueError as exc:
        raise ReviewError(str(exc)) from None


async def approve(store: PinStore, backend: str, items: Sequence[ItemKey] | None, *, by: str,
                  fingerprint: str | None = None, clock: Callable[[], float] = time.time) -> list[str]:
    """Approve held definitions (all of the backend's when `items` is None); returns the items approved."""
    chosen = _chosen(await store.held(backend), backend, items, fingerprint)
    await store.approve(backend, {key: replace(pin, by=by, at=clock(), reason="", rejected=False)
                                  for key, pin in chosen.items()})
    for key, pin in chosen.items():
        log.info("pin_approved", backend=backend, item=key_text(key), fingerprint=pin.fingerprint, by=by)
    return [key_text(key) for key in chosen]


async def reject(store: PinStore, backend: str, items: Sequence[ItemKey] | None, *, by: str,
                 fingerprint: str | None = None) -> list[str]:
    """Mark held definitions rejected: they stay held (the backend must change back, or be removed)."""
    chosen = _chosen(await store.held(backend), backend, items, fingerprint)
    await store.hold(backend, {key: replace(pin, rejected=True) for key, pin in chosen.items()})
    for key, pin in chosen.items():
        log.warning("pin_rejected", backend=backend, item=key_text(key), fingerprint=pin.fingerprint, by=by)
    return [key_text(key) for key in chosen]


def _chosen(held: Pins, backend: str, items: Sequence[ItemKey] | None, fingerprint: str | None) -> Pins:
    if items is None:
        if not held:
            raise ReviewError(f"nothing of backend {backend!r} is held for review")
        return held
    missing = [key_text(key) for key in items if key not in held]
    if missing:
        raise ReviewError(f"not held for review in backend {backend!r}: {', '.join(missing)}")
    chosen = {key: held[key] for key in items}
    if fingerprint is not None and any(pin.fingerprint != fingerprint for pin in chosen.values()):
        raise ReviewError("the held definition's fingerprint is not the one given: review it again")
    return chosen
