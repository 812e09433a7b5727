"""A retry that lands on another replica than the one holding its round, passed on through Redis.

The backend call a round holds is a live stream in one process; the sealed state names that
process's replica id. The retry's replica (having verified the state: every replica shares the
key) publishes `round_resume` on the store's event channel, the same bus that carries a session's
answers to the replica that asked (shared_state.py). The holding replica says `round_taken`,
resumes the round as for a local retry (`Rounds.resume`), publishes what the call sends its client
meanwhile (`round_note`: progress, log messages) and then the reply (`round_reply`), which the
retry's replica writes to its client. Its client closing the stream sends `round_cancel`, which
cancels the call as a local hang-up would. Without a `round_taken` within `TAKEN_SECONDS` (the
replica stopped, or Redis is down) the state cannot be honoured: -32602, as for an expired one.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import Any

from gateway.protocol import jsonrpc
from gateway.protocol.errors import InvalidParams
from gateway.protocol.jsonrpc import JsonObject
from gateway.protocol.request_state import InvalidState, RoundRef
from gateway.store.events import EventBus
from gateway.store.health import StoreUnavailable
from gateway.transport.channel import ChannelClosed, ClientChannel, PendingAsks
from gateway.transport.rounds import Rounds, Waiting

RESUME, TAKEN, NOTE, REPLY, CANCEL = "round_resume", "round_taken", "round_note", "round_reply", "round_cancel"
TAKEN_SECONDS = 5.0
"""How long the retry's replica waits for the holding one to take the retry (Redis answers in milliseconds)."""

Item = tuple[str, Any]
"""What the holding replica sends a waiting retry: (TAKEN | NOTE | REPLY, body)."""


class RemoteRounds:
    """Both ends: retries of this replica waiting on another, and other replicas' retries of rounds held here."""

    def __init__(self, events: EventBus, rounds: Rounds, *, max_wait: float) -> None:
        self.events, self.rounds, self.max_wait = events, rounds, max_wait
        self._waiting: dict[str, asyncio.Queue[Item]] = {}  # by reply id: retries of this replica
        self._serving: dict[str, asyncio.Task[None]] = {}  # by reply id: resumes run here for another replica
        for kind, handler in ((RESUME, self._on_resume), (TAKEN, self._on_item), (NOTE, self._on_item),
                              (REPLY, self._on_item), (CANCEL, self._on_cancel)):
            events.on(kind, handler)
        rounds.forward = self.forward

    # ---------------------------------------------------------------- the retry's replica

    async def forward(self, ref: RoundRef, responses: dict[str, JsonObject], waiting: Waiting) -> JsonObject:
        reply_to = secrets.token_hex(12)
        queue = self._waiting[reply_to] = asyncio.Queue()
        try:
            await self.events.publish(RESUME, to=ref.replica, round=ref.round_id, step=ref.step, responses=responses,
                                      request=waiting.request_id, progress=waiting.progress, reply_to=reply_to)
            return await self._receive(queue, waiting.stream)
        except (TimeoutError, StoreUnavailable) as exc:
            raise InvalidState(f"the replica holding the round did not answer ({type(exc).__name__})") from exc
        except asyncio.CancelledError:  # the client closed the stream: the call is cancelled where it runs
            await self.publish(CANCEL, to=ref.replica, reply_to=reply_to)
            raise
        finally:
            del self._waiting[reply_to]

    async def _receive(self, queue: asyncio.Queue[Item], stream: ClientChannel) -> JsonObject:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(TAKEN_SECONDS) as deadline:
            while True:
                kind, body = await queue.get()
                if kind == TAKEN:  # the round is held and resumed: now it may take as long as a call may
                    deadline.reschedule(loop.time() + self.max_wait)
                elif kind == NOTE:
                    with contextlib.suppress(ChannelClosed):  # the reply may still reach the client
                        await _notify(stream, body)
                else:
                    return body  # type: ignore[no-any-return]

    async def _on_item(self, event: dict[str, Any]) -> None:
        queue = self._waiting.get(str(event.get("reply_to")))
        if queue is not None:
            queue.put_nowait((event["kind"], event.get("body")))

    # ---------------------------------------------------------------- the holding replica

    async def _on_resume(self, event: dict[str, Any]) -> None:
        reply_to = event.get("reply_to")
        if event.get("to") != self.rounds.replica or not isinstance(reply_to, str) or reply_to in self._serving:
            return
        task = asyncio.create_task(self._serve(event, reply_to), name="round:remote")  # never block the bus
        self._serving[reply_to] = task
        task.add_done_callback(lambda _: self._serving.pop(reply_to, None))

    async def _serve(self, event: dict[str, Any], reply_to: str) -> None:
        request_id = event.get("request")
        try:
            step = event.get("step")
            ref = RoundRef(str(event.get("round")), step if isinstance(step, int) else -1, self.rounds.replica)
            if self.rounds.holds(ref):
                await self.publish(TAKEN, reply_to=reply_to)
            responses = event.get("responses")
            waiting = Waiting(_NoteChannel(self, reply_to), request_id, event.get("progress"))  # type: ignore[arg-type]
            reply = await self.rounds.resume(ref, responses if isinstance(responses, dict) else {}, waiting)
        except InvalidParams as exc:
            reply = jsonrpc.error_response(request_id, exc)  # type: ignore[arg-type]
        await self.publish(REPLY, reply_to=reply_to, body=reply)

    async def _on_cancel(self, event: dict[str, Any]) -> None:
        task = self._serving.get(str(event.get("reply_to")))
        if event.get("to") == self.rounds.replica and task is not None:
            task.cancel()

    async def publish(self, kind: str, **fields: Any) -> None:
        with contextlib.suppress(StoreUnavailable):  # the other end times out, as if this replica were gone
            await self.events.publish(kind, **fields)


class _NoteChannel(ClientChannel):
    """The way back to a client waiting on another replica: what the call sends it goes over the bus."""

    __slots__ = ("remote", "reply_to")

    def __init__(self, remote: RemoteRounds, reply_to: str) -> None:
        super().__init__(PendingAsks(), "")
        self.remote, self.reply_to = remote, reply_to

    async def send(self, message: JsonObject) -> None:
        await self.remote.publish(NOTE, reply_to=self.reply_to, body=message)


async def _notify(stream: ClientChannel, message: Any) -> None:
    if isinstance(message, dict):
        await stream.notify(message)
