"""Requests in flight per session, so a client's notifications/cancelled can stop one.

The HTTP handler that runs a request registers its own task; a cancel notification from the
same session cancels that task, which cancels the upstream call (the upstream then sends
notifications/cancelled to the backend). The cancelled request is answered with no JSON-RPC
response, as the spec asks. A cancel that reaches another replica finds nothing and is ignored
(the spec allows ignoring unknown ids); a client that hangs up cancels on any replica.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")
Key = tuple[str, Any]  # (session id, JSON-RPC request id)


class CancelledByClient(Exception):
    """The client cancelled this request with notifications/cancelled."""


class InFlight:
    def __init__(self) -> None:
        self._tasks: dict[Key, asyncio.Task[Any]] = {}
        self._by_client: set[Key] = set()

    async def run(self, key: Key, work: Awaitable[T]) -> T:
        """Await `work` as the request `key`; raise CancelledByClient if the client cancels it."""
        task = asyncio.current_task()
        assert task is not None
        if key in self._tasks:  # an id reused while in flight: only the newest can be cancelled
            self._by_client.discard(key)
        self._tasks[key] = task
        try:
            return await work
        except asyncio.CancelledError:
            if key not in self._by_client:
                raise  # the client hung up, or the gateway is stopping
            task.uncancel()
            raise CancelledByClient from None
        finally:
            if self._tasks.get(key) is task:
                del self._tasks[key]
                self._by_client.discard(key)

    def cancel(self, key: Key) -> bool:
        """Cancel the request `key` if it is in flight here; False when unknown or finished."""
        task = self._tasks.get(key)
        if task is None or task.done():
            return False
        self._by_client.add(key)
        task.cancel()
        return True
