"""Client channels: the one way every layer below the transport reaches the client.

A channel sends a notification, or asks the client a question (a server-to-client request
such as `roots/list`) and awaits its answer. Each transport provides only `send` (how a
message reaches this client: a POST's SSE stream, the session's GET stream, stdout); the
id minting and answer matching live here once, in `PendingAsks`, whichever transport the
answer comes back on (a POST carrying a JSON-RPC response, or a line on stdin).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.protocol import spec
from gateway.protocol.jsonrpc import JsonObject, RequestId
from gateway.tenancy import ChannelClosed

__all__ = ["ASK_ID_PREFIX", "ChannelClosed", "ClientChannel", "ForwardAnswer", "PendingAsks"]

ASK_ID_PREFIX = "mcpgw-"
"""Ids the gateway mints for its own requests to a client, never mistaken for a client's."""
ForwardAnswer = Callable[[str, JsonObject], Awaitable[None]]
"""Passes a session's answer that no ask of this process waits for to the other replicas."""
WITHDRAW_SECONDS = 1.0
"""How long telling a client that an ask is withdrawn may take (a stuck stream must not hold the call)."""


class PendingAsks:
    """The gateway's requests to clients that await an answer, keyed by (client key, minted id)."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, RequestId], asyncio.Future[JsonObject]] = {}
        self._ids = itertools.count(1)

    def open(self, client: str) -> tuple[str, asyncio.Future[JsonObject]]:
        request_id = f"{ASK_ID_PREFIX}{next(self._ids)}"
        future = self._waiting[(client, request_id)] = asyncio.get_running_loop().create_future()
        return request_id, future

    def close(self, client: str, request_id: str) -> None:
        self._waiting.pop((client, request_id), None)

    def answer(self, client: str, response: JsonObject) -> bool:
        """Hand a client's JSON-RPC response to the ask it answers; False when nothing waits for it."""
        future = self._waiting.pop((client, response.get("id")), None)  # type: ignore[arg-type]
        if future is None or future.done():
            return False
        future.set_result(response)
        return True

    def abandon(self, client: str) -> None:
        """The client went away: every ask still waiting on it fails at once."""
        for key in [key for key in self._waiting if key[0] == client]:
            future = self._waiting.pop(key)
            if not future.done():
                future.set_exception(ChannelClosed("the client went away"))

    def __len__(self) -> int:
        return len(self._waiting)


class ClientChannel:
    """One way back to one client: notifications, and requests whose answers come back later.

    A transport subclasses it with `send`, the one thing that differs: a POST's SSE stream,
    the session's GET stream, or stdout.
    """

    __slots__ = ("client", "pending")

    def __init__(self, pending: PendingAsks, client: str) -> None:
        self.pending = pending
        self.client = client  # the key the client's answers come back under (its session id)

    async def send(self, message: JsonObject) -> None:
        """Deliver one JSON-RPC message to the client; raise ChannelClosed if it cannot be."""
        raise NotImplementedError

    async def notify(self, message: JsonObject) -> None:
        await self.send(message)

    async def keepalive(self) -> None:
        """A sign of life on a long stream; nothing by default (a POST's SSE stream writes a comment)."""

    async def ask(self, method: str, params: JsonObject | None, *, timeout: float) -> JsonObject:  # noqa: ASYNC109
        """Send a request to the client and return its response message (`result` or `error`).

        Raises ChannelClosed when the client cannot be reached, TimeoutError when it does not answer.
        """
        request_id, answer = self.pending.open(self.client)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self.send(message)
            async with asyncio.timeout(timeout):
                return await answer
        except (TimeoutError, asyncio.CancelledError):
            await self._withdraw(request_id)
            raise
        finally:
            self.pending.close(self.client, request_id)

    async def _withdraw(self, request_id: str) -> None:
        """We stopped waiting (timeout, or the call ended): tell the client, so it stops asking its user.

        Sent before the ask ends, so a POST stream still carries it (its response comes after).
        """
        cancelled = {"jsonrpc": "2.0", "method": spec.CANCELLED,
                     "params": {"requestId": request_id, "reason": "the gateway no longer waits for the answer"}}
        with contextlib.suppress(ChannelClosed, TimeoutError):
            async with asyncio.timeout(WITHDRAW_SECONDS):
                await self.send(cancelled)
