"""Log messages for clients: `logging/setLevel`, and the backends' `notifications/message`.

A client's level is kept with its session (or by the stdio client) and applied by the gateway
itself to the log messages it relays to that client during a request. It is also passed on to
the tenant's backends that declared `logging`, but a backend session may serve several clients
(and a stdio child every tenant), so a backend is only ever made more verbose, never quieter:
one client's `error` must not silence another's `debug`. The gateway's filter does the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gateway.config import Config, HttpBackend
from gateway.protocol import spec
from gateway.protocol.capabilities import LOG_LEVELS, NONE, SEVERITY, log_level, loud_enough
from gateway.protocol.errors import InvalidParams
from gateway.protocol.jsonrpc import JsonObject
from gateway.tenancy import RequestContext, upstream_headers
from gateway.upstream.base import NotificationHandler, Upstream, UpstreamError

FORWARD_TIMEOUT = 5.0
"""Seconds a backend may take to accept a forwarded level before the client is answered anyway."""


def client_notifier(ctx: RequestContext) -> NotificationHandler | None:
    """Where the backend's notifications about this request go: the client, log messages filtered."""
    channel, level = ctx.channel, ctx.log_level
    if channel is None or level is None:
        return channel.notify if channel is not None else None

    async def notify(message: JsonObject) -> None:
        if message.get("method") != spec.MESSAGE or loud_enough(message, level):
            await channel.notify(message)

    return notify


class LevelSetter:
    """Answers `logging/setLevel`: keeps the client's level, then passes it on where it adds messages."""

    def __init__(self, config: Config, upstream: Callable[[str], Upstream]) -> None:
        self._config = config
        self._upstream = upstream
        self._forwarded: dict[tuple[str, str, frozenset[str]], int] = {}  # backend session -> severity set

    async def __call__(self, params: JsonObject | None, ctx: RequestContext) -> JsonObject:
        level = log_level((params or {}).get("level"))
        if level is None:
            raise InvalidParams(f"Invalid params: level must be one of {', '.join(LOG_LEVELS)}")
        if ctx.settings is not None:
            await ctx.settings.set_log_level(ctx.session_id or "", level)
        await asyncio.gather(*(self._forward(name, level, ctx) for name in self._logging_backends(ctx)))
        return {}

    def _logging_backends(self, ctx: RequestContext) -> list[str]:
        """The tenant's backends that declared `logging` when the gateway last met them."""
        allowed = ctx.tenant.backends
        return [b.name for b in self._config.backends
                if ("*" in allowed or b.name in allowed) and "logging" in self._upstream(b.name).server_capabilities]

    async def _forward(self, name: str, level: str, ctx: RequestContext) -> None:
        backend = self._config.backend(name)
        assert backend is not None
        shared = not isinstance(backend, HttpBackend)  # one stdio child serves every tenant
        key = (name, "", NONE) if shared else (name, ctx.principal.tenant, ctx.capabilities)
        if SEVERITY[level] >= self._forwarded.get(key, len(LOG_LEVELS)):
            return  # that backend session already sends this much (see the module docstring)
        self._forwarded[key] = SEVERITY[level]
        try:
            reply = await self._upstream(name).request(
                spec.LOGGING_SET_LEVEL, {"level": level}, timeout=FORWARD_TIMEOUT,
                session_key=ctx.principal.tenant, capabilities=ctx.capabilities,
                headers=upstream_headers(backend, ctx.tenant, ctx.principal))
        except UpstreamError:
            reply = None
        if reply is None or "error" in reply:  # best effort: the gateway's own filter still applies
            self._forwarded.pop(key, None)
