"""Call deadlines without a timer per call.

A backend call's deadline is usually far off (30 s by default) and the call ends long before
it, so `asyncio.timeout_at` makes a timer for every call only to cancel it a millisecond later
(a measurable cost, bench/FIGURES.md). Here a call enters an unarmed `asyncio.timeout(None)`
and is watched; one sweep every SWEEP_SECONDS arms the timer of each call whose deadline comes
before the sweep after next, at its exact deadline. Expiry, cancellation and the TimeoutError
stay asyncio's own. A scope rescheduled meanwhile (progress extends a deadline) is armed
already and left alone.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress

SWEEP_SECONDS = 0.5
"""How often the watched deadlines are looked at (only while there are some)."""


class Deadlines:
    def __init__(self, sweep_seconds: float = SWEEP_SECONDS) -> None:
        self._sweep_seconds = sweep_seconds
        self._watched: dict[asyncio.Timeout, float] = {}
        self._sweeping = False

    def watch(self, scope: asyncio.Timeout, when: float, loop: asyncio.AbstractEventLoop) -> None:
        """Have the entered, unarmed `scope` expire at `when` (loop.time()); pair with `forget`."""
        if when <= loop.time() + 2 * self._sweep_seconds:
            scope.reschedule(when)  # a short budget: no sweep would come in time
            return
        self._watched[scope] = when
        if not self._sweeping:
            self._sweeping = True
            loop.call_later(self._sweep_seconds, self._sweep, loop)

    def forget(self, scope: asyncio.Timeout) -> None:
        """The scope is done (or about to exit): never touch it again."""
        self._watched.pop(scope, None)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            self._arm_due(loop)
        finally:  # whatever went wrong with one scope, later deadlines are still armed
            if self._watched:
                loop.call_later(self._sweep_seconds, self._sweep, loop)
            else:
                self._sweeping = False

    def _arm_due(self, loop: asyncio.AbstractEventLoop) -> None:
        horizon = loop.time() + 2 * self._sweep_seconds
        for scope in [scope for scope, when in self._watched.items() if when <= horizon]:
            when = self._watched.pop(scope)
            if scope.when() is None:  # not armed by a reschedule meanwhile
                with suppress(RuntimeError):  # exited without `forget`: nothing is left to expire
                    scope.reschedule(when)
