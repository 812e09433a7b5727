"""A 2026 stdio child's `subscriptions/listen` requests: what it tells unasked (PROTOCOL-2026 §A.7).

A 2026 child sends no list change or resource update of itself: they come on a listen request.
Over pipes that is one more request in flight: the reader hands each frame tagged with its id
(`subscriptionId`) to that request's inbox (stdio/calls.py), so a listen that stays open holds
no other call, and its response, when the stream ends, is matched by id like any other's.

The upstream keeps one listen for the list changes the child's `server/discover` promises
(`promised`, as for HTTP: http/listen.py), and ResourceWatch (watch.py) runs its streams of
resource subscriptions here too. A stream lives as long as the upstream speaks 2026 (`alive`):
when the child dies it waits for the next child and listens again (the kinds a new stream
honours are re-listed: there is no replay); a stream the child ends is opened again with
backoff. A child that refuses the listen (-32601) is not asked again until it restarts. While
no list-change stream is acknowledged, `live` is False and the catalogue re-lists the child
after the requests it serves (catalogue/relisting.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from multidict import CIMultiDict

from gateway.protocol import spec
from gateway.protocol.capabilities import NONE
from gateway.upstream.base import BackgroundTasks, Backoff, JsonObject, NotificationHandler, UpstreamError
from gateway.upstream.modern import Ending, ModernWire, honoured

_log = structlog.get_logger("gateway.upstream")

Send = Callable[[JsonObject, NotificationHandler], Awaitable[JsonObject]]
"""Sends a listen request to the serving child: its response; its frames go to the handler first."""


@dataclass(slots=True)
class _Run:
    """One `run`: its streams, one after another (a runner may have several runs at once)."""

    on_ack: Callable[[], None]
    backoff: Backoff = field(default_factory=Backoff)
    heard: bool = False  # a stream of this run was acknowledged: what a later one honours is re-listed


def subscription_id(message: JsonObject) -> Any:
    """The listen request a child's notification belongs to (its `subscriptionId`), or None."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get(spec.SUBSCRIPTION_ID_KEY) if isinstance(meta, dict) else None


class StdioListen:
    """Listen requests to a stdio backend's 2026 children, kept open while `alive()`."""

    def __init__(self, backend: str, send: Send, serving: asyncio.Event, wire: ModernWire, tasks: BackgroundTasks, *,
                 on_changed: Callable[[str], None], on_updated: Callable[[JsonObject], None] | None = None) -> None:
        self._backend = backend
        self._send = send
        self._serving = serving  # set while a child serves (its first exchange done)
        self._wire = wire
        self._tasks = tasks
        self._on_changed = on_changed
        self._on_updated = on_updated
        self._task: asyncio.Task[None] | None = None
        self.live = False
        """A stream is open and acknowledged: the child's list changes will be heard."""

    def start(self, wanted: Callable[[], JsonObject], alive: Callable[[], bool]) -> None:
        """Listen for `wanted()` (the list changes promised), unless a stream runs already."""
        if self._task is None or self._task.done():
            self._task = self._tasks.spawn(self.run(wanted, CIMultiDict(), alive), "subscriptions/listen")

    async def run(self, wanted: Callable[[], JsonObject], headers: CIMultiDict[str], alive: Callable[[], bool],
                  on_ack: Callable[[], None] = lambda: None) -> None:
        """Listen for `wanted()` (asked again at each new stream; {}: stop) while `alive()`; `on_ack` is
        told each time a stream is acknowledged. `headers` are ignored: a child has no identities."""
        run = _Run(on_ack)
        try:
            while True:
                await self._serving.wait()
                asked = wanted() if alive() else {}
                if not asked:
                    return
                try:
                    ending = _ended(await self._listen_once(asked, run))
                except UpstreamError as exc:  # the child died: the next one is listened to
                    _log.debug("upstream listen request failed", backend=self._backend, error=str(exc))
                    ending = Ending.BROKE
                self.live = False
                if ending is Ending.REFUSED:
                    _log.info("upstream child serves no listen", backend=self._backend)
                    return
                if self._serving.is_set():  # the same child ended it: ask again, not at once
                    await asyncio.sleep(run.backoff.next())
        finally:
            self.live = False

    async def _listen_once(self, wanted: JsonObject, run: _Run) -> JsonObject:
        """One listen request: its response, when the stream ends."""
        acknowledged = False

        async def frame(message: JsonObject) -> None:
            nonlocal acknowledged
            method = message["method"]
            if method == spec.SUBSCRIPTIONS_ACKNOWLEDGED and not acknowledged:
                acknowledged = True
                self._acknowledged(message, run)
            elif acknowledged and method in spec.LIST_CHANGED:
                self._on_changed(method)
            elif acknowledged and self._on_updated is not None and method == spec.RESOURCES_UPDATED:
                self._on_updated(message)

        params = self._wire.envelope({"notifications": wanted}, NONE, logs=False)
        return await self._send(params, frame)

    def _acknowledged(self, ack: JsonObject, run: _Run) -> None:
        """The stream is open: what it honours is heard from now on, and re-listed if it came back."""
        methods = honoured(ack)
        self.live = bool(methods)
        run.backoff.reset()
        for method in methods if run.heard else ():  # what changed while no stream was open is unknown
            self._on_changed(method)
        run.heard = True
        run.on_ack()


def _ended(reply: JsonObject) -> Ending:
    """The listen request's response: "method not found" refuses it, anything else ends it."""
    error = reply.get("error")
    if isinstance(error, dict) and error.get("code") == spec.METHOD_NOT_FOUND:
        return Ending.REFUSED
    return Ending.BROKE
