"""Which protocol era a stdio child speaks, and a request in the 2026 era over its pipes.

A stdio connection's era is fixed by its first request (the official SDK's dual-era loop), so
it is chosen once per child, when it starts: `protocol` "handshake" sends `initialize`, "2026"
sends `server/discover` with the gateway's envelope, and "auto" tries the handshake first and
`server/discover` when the child refuses it (a 2026-only child). A restarted child is probed
again, so a backend replaced by one of the other era is found out.

At 2026 every request carries the gateway's envelope, declaring what the call's own client
can answer (not everything, as a handshake must for all clients at once); an
`InputRequiredResult` names its call, so its questions reach exactly that call's client.
"""

from __future__ import annotations

from typing import Any

import structlog

from gateway.config.model import BACKEND_PROTOCOLS
from gateway.errors import FailureReason
from gateway.protocol.capabilities import ALL, TASKS
from gateway.protocol.spec import INITIALIZE, INITIALIZED, SERVER_DISCOVER
from gateway.upstream.base import (
    JsonObject,
    NotificationHandler,
    RequestHandler,
    UpstreamError,
    initialize_params,
    negotiated_version,
    notification_message,
    server_capabilities,
)
from gateway.upstream.http_eras import LOCAL_AT_2026
from gateway.upstream.input_rounds import answering, settle
from gateway.upstream.modern import MODERN_VERSION, ModernWire, discovered
from gateway.upstream.stdio_process import Process

_log = structlog.get_logger("gateway.upstream")

AUTO, MODERN, HANDSHAKE = BACKEND_PROTOCOLS
Handlers = tuple[NotificationHandler | None, RequestHandler | None]


class StdioEras:
    """The era half of StdioUpstream (a mixin: it uses the upstream's calls and writes)."""

    name: str
    protocol_version: str | None
    server_capabilities: JsonObject
    _protocol: str
    _modern: bool
    _wire: ModernWire
    _requested_version: str
    _client_info: dict[str, Any]
    _start_timeout: float

    async def _call(self, process: Process, method: str, params: JsonObject | None, timeout: float | None,  # noqa: ASYNC109
                    handlers: Handlers) -> JsonObject: ...

    async def _write(self, process: Process, message: JsonObject) -> None: ...

    @property
    def list_ttl_ms(self) -> int | None:
        """The cache hint of the backend's lists (2026 only; the catalogue refreshes no later)."""
        return self._wire.list_ttl_ms if self._modern else None

    @property
    def announces(self) -> bool:
        """A 2026 child is not listened to (no listen request over its pipes): it cannot announce."""
        return not self._modern

    async def _open(self, process: Process) -> None:
        """The child's first exchange, in the configured era; UpstreamError when it takes neither."""
        self._modern = False
        if self._protocol != MODERN:
            try:
                return await self._initialize(process)
            except UpstreamError:
                if self._protocol == HANDSHAKE:
                    raise
        reply = await self._call(process, SERVER_DISCOVER, self._wire.envelope(None, ALL, logs=False),
                                 self._start_timeout, (None, None))
        capabilities = discovered(reply)
        if capabilities is None:
            raise UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: refused server/discover at {MODERN_VERSION}")
        self.protocol_version, self.server_capabilities, self._modern = MODERN_VERSION, capabilities, True
        _log.info("backend era found", backend=self.name, era=MODERN)

    async def _initialize(self, process: Process) -> None:
        params = initialize_params(self._requested_version, self._client_info, ALL)
        reply = await self._call(process, INITIALIZE, params, self._start_timeout, (None, None))
        self.protocol_version = negotiated_version(self.name, reply)
        self.server_capabilities = server_capabilities(reply)
        await self._write(process, notification_message(INITIALIZED, None))

    async def _modern_request(self, process: Process, method: str, params: JsonObject | None,
                              timeout: float | None, handlers: Handlers,  # noqa: ASYNC109
                              flags: frozenset[str]) -> JsonObject:
        if method in LOCAL_AT_2026:
            return {"jsonrpc": "2.0", "id": 0, "result": {}}

        async def send(sent: JsonObject) -> JsonObject:
            return await self._call(process, method, sent, timeout, handlers)

        envelope = self._wire.envelope(params, answering(handlers[1], flags), logs=handlers[0] is not None)
        return self._wire.received(method, await settle(send, envelope, handlers[1]), tasks=TASKS in flags)
