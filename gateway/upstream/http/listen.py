"""A 2026 HTTP backend's `subscriptions/listen` stream: its list changes, told unasked (PROTOCOL-2026 §A.7).

A 2026 backend has no session, so no GET stream; what it announces comes on a listen stream. The
gateway keeps one per backend, under the catalogue's identity (the configured headers, never a
tenant's): the catalogue lists the backend as that identity, so those are the lists whose changes
count. It is opened when `server/discover` promises `listChanged` for tools, prompts or resources,
asks for exactly those kinds, and runs on a client of one connection of its own. After a break
(or the backend's graceful end) it listens again, with backoff; there is no replay at 2026, so the
kinds a new stream honours are re-listed. A backend that refuses the listen (-32601, or an HTTP 4xx
other than conflict or throttling) is not asked again until its next discover. While no stream is
acknowledged, `live` is False: the backend counts as one that cannot announce, and the catalogue
re-lists it after the requests it serves instead (catalogue/relisting.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import aclosing
from typing import Any

import orjson
import structlog
from multidict import CIMultiDict

from gateway.protocol import spec
from gateway.protocol.capabilities import NONE
from gateway.protocol.sse import SseDecoder
from gateway.upstream.base import BackgroundTasks, Backoff, JsonObject, UpstreamError, message_kind, request_message
from gateway.upstream.http.body import BoundedBody
from gateway.upstream.http.client import TRANSPORT_ERRORS, HttpTransport, Response
from gateway.upstream.http.listener import stream_refused
from gateway.upstream.http.session import CATALOGUE_KEY, BackendSession
from gateway.upstream.modern import MODERN_VERSION, Ending, ModernWire, honoured, promised

_log = structlog.get_logger("gateway.upstream")

class ListenStream:
    """One backend's listen stream, kept open while `alive()`; list changes go to `on_changed`."""

    def __init__(self, body: BoundedBody, open_client: Callable[[], HttpTransport], wire: ModernWire,
                 on_changed: Callable[[str], None], tasks: BackgroundTasks,
                 on_updated: Callable[[JsonObject], None] | None = None) -> None:
        self._body = body
        self._open_client = open_client
        self._wire = wire
        self._on_changed = on_changed
        self._on_updated = on_updated
        self._tasks = tasks
        self._task: asyncio.Task[None] | None = None
        self._ids = 0
        self.live = False
        """A stream is open and acknowledged: the backend's list changes will be heard."""

    def start(self, capabilities: JsonObject, headers: CIMultiDict[str], alive: Callable[[], bool]) -> None:
        """Listen for what `capabilities` promise, unless that is nothing or a stream runs already."""
        wanted = promised(capabilities)
        if wanted and (self._task is None or self._task.done()):
            self._task = self._tasks.spawn(self.run(lambda: wanted, headers, alive), "subscriptions/listen")

    async def run(self, wanted: Callable[[], JsonObject], headers: CIMultiDict[str], alive: Callable[[], bool],
                  on_ack: Callable[[], None] = lambda: None) -> None:
        """Listen for `wanted()` (asked again at each new stream) while `alive()`, on a client of its own;
        `on_ack` is told each time a stream is acknowledged."""
        client, backoff, heard = self._open_client(), Backoff(), False
        try:
            while alive():
                ending, acknowledged = await self._listen_once(client, wanted(), headers, (backoff, on_ack), heard)
                self.live, heard = False, heard or acknowledged
                if ending is Ending.REFUSED:
                    _log.info("upstream serves no listen stream", backend=self._body.backend)
                    return
                await asyncio.sleep(backoff.next())
        finally:
            self.live = False
            await client.close()

    async def _listen_once(self, client: HttpTransport, wanted: JsonObject, headers: CIMultiDict[str],
                           acks: tuple[Backoff, Callable[[], None]], relist: bool) -> tuple[Ending, bool]:
        """One listen request, read to its end: how it ended, and whether it was acknowledged."""
        self._ids += 1
        request_id = self._ids
        params = self._wire.envelope({"notifications": wanted}, NONE, logs=False)
        sent = BackendSession(CATALOGUE_KEY, headers, protocol_version=MODERN_VERSION).post_headers(headers)
        sent.update(self._wire.headers(spec.SUBSCRIPTIONS_LISTEN, params))
        acknowledged = False

        async def consume(resp: Response) -> Ending:
            nonlocal acknowledged
            if resp.content_type != spec.SSE:
                return await self._unstreamed(resp)
            async with aclosing(self._body.events(resp, SseDecoder())) as events:
                async for event in events:
                    message = self._body.decode(event.data) if event.event == "message" and event.data else None
                    if _tagged(message, request_id, spec.SUBSCRIPTIONS_ACKNOWLEDGED):
                        acknowledged = self._acknowledged(message, acks[0], relist)
                        acks[1]()
                    elif acknowledged and _tagged(message, request_id, None):
                        self._on_changed(message["method"])
                    elif acknowledged and self._on_updated and _tagged(message, request_id, spec.RESOURCES_UPDATED):
                        self._on_updated(message)
                    elif message_kind(message) == "response":
                        return _ended(message)
            return Ending.BROKE

        message = request_message(request_id, spec.SUBSCRIPTIONS_LISTEN, params)
        try:
            return await client.send("POST", sent, orjson.dumps(message), consume), acknowledged
        except (*TRANSPORT_ERRORS, UpstreamError) as exc:  # acknowledged still counts: its kinds are re-listed
            _log.debug("upstream listen stream broke", backend=self._body.backend, error=repr(exc))
            return Ending.BROKE, acknowledged

    def _acknowledged(self, ack: JsonObject, backoff: Backoff, relist: bool) -> bool:
        """The stream is open: what it honours is heard from now on, and re-listed if it came back."""
        methods = honoured(ack)
        self.live = bool(methods)
        backoff.reset()
        for method in methods if relist else ():  # what changed while no stream was open is unknown
            self._on_changed(method)
        return True

    async def _unstreamed(self, resp: Response) -> Ending:
        """A reply that is no stream: a refusal, or a failure to listen again after."""
        if stream_refused(resp.status):
            return Ending.REFUSED
        if resp.status == 200 and resp.content_type == spec.JSON:
            return _ended(self._body.decode(await self._body.read(resp)))
        return Ending.BROKE


def _tagged(message: Any, request_id: int, method: str | None) -> bool:
    """Whether `message` is a notification of this subscription (`method`, or a list change when None)."""
    if message_kind(message) != "notification" or not isinstance(message.get("params"), dict):
        return False
    if method is None and message["method"] not in spec.LIST_CHANGED:
        return False
    if method is not None and message["method"] != method:
        return False
    meta = message["params"].get("_meta")
    return isinstance(meta, dict) and meta.get(spec.SUBSCRIPTION_ID_KEY) == request_id


def _ended(reply: Any) -> Ending:
    """The listen request's JSON-RPC response: "method not found" refuses it, anything else ends it."""
    error = reply.get("error") if isinstance(reply, dict) else None
    if isinstance(error, dict) and error.get("code") == spec.METHOD_NOT_FOUND:
        return Ending.REFUSED
    return Ending.BROKE
