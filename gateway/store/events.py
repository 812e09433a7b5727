"""Cross-replica events on one Redis pub/sub channel, `{key_prefix}events`.

A message is a small JSON object: `{"kind": "...", "from": "<replica id>", ...fields}`.
Each replica subscribes once (one dedicated connection); handlers are registered per kind;
a replica ignores its own messages, since it acted on them before publishing.

Pub/sub delivers at most once: a replica that was cut off may have missed messages. So
after every (re)subscription, which Redis confirms with a `subscribe` message (also when
redis-py reconnects by itself), the `on_resync` handlers compare local state with Redis.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import structlog

from gateway.store.health import OUTAGE_ERRORS, StoreHealth, cancel_quietly, close_quietly

log = structlog.get_logger("gateway.store")

Handler = Callable[[dict[str, Any]], Awaitable[None]]
Resync = Callable[[], Awaitable[None]]

LISTEN_POLL_SECONDS = 0.5
"""How long one wait for a message lasts, so a Redis declared down is left promptly."""

RETRY_SECONDS = 1.0
"""Pause after an unexpected listener failure (not an outage) before subscribing again."""


class EventBus:
    """Publish to every replica; run this replica's handlers for what the others publish."""

    def __init__(self, redis: Any, *, channel: str, health: StoreHealth, replica_id: str | None = None) -> None:
        self.redis = redis
        self.channel = channel
        self.health = health
        self.replica_id = replica_id or secrets.token_hex(8)
        self.subscribed = asyncio.Event()
        self._handlers: dict[str, list[Handler]] = {}
        self._resyncs: list[Resync] = []
        self._resync_task: asyncio.Task[None] | None = None

    def on(self, kind: str, handler: Handler) -> None:
        self._handlers.setdefault(kind, []).append(handler)

    def on_resync(self, handler: Resync) -> None:
        """Run `handler()` after every (re)subscription: messages may have been missed."""
        self._resyncs.append(handler)

    async def publish(self, kind: str, **fields: Any) -> None:
        """Tell every other replica; StoreUnavailable when Redis is down (the caller keeps it pending)."""
        data = orjson.dumps({"kind": kind, "from": self.replica_id, **fields})
        await self.health.call(lambda: self.redis.publish(self.channel, data))

    async def run(self) -> None:
        """The subscriber (a task): listen while Redis is up, subscribe again when it returns."""
        try:
            while True:
                await self.health.wait_up()
                try:
                    await self._listen()
                except OUTAGE_ERRORS as exc:
                    self.health.failed(exc)
                except Exception:
                    log.exception("store_events_failed")
                    await asyncio.sleep(RETRY_SECONDS)
                finally:
                    self.subscribed.clear()
        finally:
            await cancel_quietly(self._resync_task)

    async def _listen(self) -> None:
        pubsub = self.redis.pubsub()
        try:
            async with asyncio.timeout(self.health.timeout_seconds):
                await pubsub.subscribe(self.channel)
            while self.health.up:  # a Redis declared down by the watchdog is left, then joined again
                message = await pubsub.get_message(timeout=LISTEN_POLL_SECONDS)
                if message is not None:
                    await self._on_message(message)
        finally:
            await close_quietly(pubsub)

    async def _on_message(self, message: dict[str, Any]) -> None:
        if message.get("type") == "subscribe":  # the first subscription, or redis-py's own reconnect
            self.subscribed.set()
            self._start_resync()
        elif message.get("type") == "message":
            await self._dispatch(message.get("data"))

    async def _dispatch(self, data: Any) -> None:
        try:
            event = orjson.loads(data)
        except (orjson.JSONDecodeError, TypeError):
            log.warning("store_event_invalid")
            return
        if not isinstance(event, dict) or event.get("from") == self.replica_id:
            return
        for handler in self._handlers.get(str(event.get("kind")), ()):
            try:
                await handler(event)
            except Exception:  # one broken handler must not stop the others, or the listener
                log.exception("store_event_handler_failed", kind=event.get("kind"))

    def _start_resync(self) -> None:
        if self._resync_task is not None and not self._resync_task.done():
            self._resync_task.cancel()  # a newer resync supersedes it
        self._resync_task = asyncio.create_task(self._resync(), name="store-resync")

    async def _resync(self) -> None:
        for handler in self._resyncs:
            try:
                await handler()
            except Exception:
                log.exception("store_resync_failed")

