"""The calls in flight on one stdio child, and which of them a message of the child's belongs to.

A response names its call by id and a progress notification by token; a backend's request
(sampling, elicitation, roots) or log line names none. Those go to the one call in flight
that relays them to its client, and to none when there are several: a stdio child serves
every client of the gateway, so a guess could hand one client another's question. A call
that relays and ended without its response (timeout, cancelled) may still have a question
on its way from the child, so for a short while after one, nothing is relayed either. A 2026
listen request's frames name it by its id (their `subscriptionId`), and go to it alone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import structlog

from gateway.protocol.spec import PROGRESS
from gateway.upstream.base import JsonObject, NotificationHandler, RequestHandler, UpstreamError, restore_progress_token

_log = structlog.get_logger("gateway.upstream")

UNSURE_SECONDS = 5.0
"""After a relaying call ended unanswered, how long the child's call-less messages are not relayed."""


class Pending:
    """One request in flight; the reader puts its notifications, then the response, in its inbox."""

    __slots__ = ("inbox", "listens", "on_request", "original_token")

    def __init__(self, original_token: Any, on_request: RequestHandler | None, *, listens: bool = False) -> None:
        self.original_token = original_token
        self.on_request = on_request  # None: the caller relays nothing (e.g. the catalogue's tools/list)
        self.listens = listens  # a subscriptions/listen: the notifications tagged with its id are its own
        self.inbox: asyncio.Queue[JsonObject | UpstreamError] = asyncio.Queue()

    async def answer(self, on_notification: NotificationHandler | None, backend: str) -> JsonObject:
        """The response, once the notifications before it went to `on_notification` (progress with
        the caller's own token); the error the reader put in instead is raised."""
        while True:
            item = await self.inbox.get()
            if isinstance(item, UpstreamError):
                raise item
            if "method" not in item:
                return item  # the response; notifications only come before it
            if on_notification is not None:
                await self._deliver(on_notification, item, backend)

    async def _deliver(self, handler: NotificationHandler, message: JsonObject, backend: str) -> None:
        try:
            await handler(restore_progress_token(message, self.original_token) if message["method"] == PROGRESS
                          else message)
        except Exception:  # the caller's handler must not break the exchange
            _log.exception("notification handler failed", backend=backend)


class Calls:
    """The requests in flight on one child, by upstream id and by progress token."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.by_id: dict[int, Pending] = {}
        self.by_token: dict[str, Pending] = {}
        self._clock = clock
        self._unsure_until = 0.0

    def add(self, request_id: int, token: str | None, pending: Pending) -> Pending:
        self.by_id[request_id] = pending
        if token is not None:
            self.by_token[token] = pending
        return pending

    def remove(self, request_id: int, token: str, *, answered: bool) -> None:
        pending = self.by_id.pop(request_id, None)
        self.by_token.pop(token, None)
        if not answered and pending is not None and pending.on_request is not None:
            self._unsure_until = self._clock() + UNSURE_SECONDS

    def deliver(self, request_id: Any, item: JsonObject | UpstreamError, *, listens: bool = False) -> bool:
        """Hand `item` to the call `request_id` names (only to a listen if `listens`); False: no such call."""
        pending = self.by_id.get(request_id) if type(request_id) is int else None
        if pending is None or (listens and not pending.listens):
            return False
        pending.inbox.put_nowait(item)
        return True

    def owner(self) -> tuple[Pending | None, str]:
        """The call a message that names none belongs to, or None and why there is none."""
        relaying = [call for call in self.by_id.values() if call.on_request is not None]
        if not relaying:
            return None, "no call relays it"
        if len(relaying) > 1:
            return None, "several calls are in flight, and a stdio request names none"
        if self._clock() < self._unsure_until:
            return None, "a call ended unanswered a moment ago; this may be its question"
        return relaying[0], ""

    def fail_all(self, error: Callable[[], UpstreamError]) -> None:
        """Every call in flight fails with an error of its own (`error()`)."""
        for pending in self.by_id.values():
            pending.inbox.put_nowait(error())
