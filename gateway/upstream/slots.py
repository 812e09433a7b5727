"""A counting semaphore whose uncontended path is one plain method call.

Every tools/call takes two of these (the backend's concurrency limit, then a pooled
connection). `asyncio.Semaphore.acquire` is a coroutine that scans its waiters on every
call, a measurable share of a call's instructions (bench/FIGURES.md); here a free slot is `try_take()`, and only
a caller that must queue awaits `take()`. Waiters are served first come, first served; a
slot handed to a waiter that is cancelled at that moment goes on to the next one.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Slots:
    def __init__(self, count: int) -> None:
        self._free = count
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def free(self) -> int:
        return self._free

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def try_take(self) -> bool:
        """Take a free slot now if there is one and nobody queues before us."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return True
        return False

    async def take(self) -> None:
        """Take a slot, waiting in line for one; pair with `give()`."""
        if self.try_take():
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot just as we were cancelled: the next one gets it
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise

    def give(self) -> None:
        """Return a slot: straight to the first waiter still waiting, else to the free count."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1
