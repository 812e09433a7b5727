"""Who is asking and under which policy: the principal and the per-request context."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from gateway.config import BackendConfig, HttpBackend, TenantConfig
from gateway.config.server_model import VirtualServer
from gateway.policy import Principal
from gateway.protocol.eras import Envelope, JsonObject
from gateway.protocol.errors import Forbidden
from gateway.protocol.request_state import Passed, StateSeal

if TYPE_CHECKING:
    from gateway.tracing.spans import RequestSpan

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
"""Characters percent-encoded in identity header values."""


__all__ = ["Channel", "ChannelClosed", "ClientSettings", "Principal", "RequestContext", "resolve_tenant",
           "upstream_headers"]


class ChannelClosed(Exception):
    """The client cannot be reached on this channel (its stream is gone or was never opened)."""


class Channel(Protocol):
    """The way back to the client of a request (`transport.channel.ClientChannel`)."""

    async def notify(self, message: dict[str, Any]) -> None:
        """Send the client a notification."""

    async def keepalive(self) -> None:
        """A sign of life on a long stream (an SSE comment); nothing where there is none to give."""

    async def ask(self, method: str, params: dict[str, Any] | None, *, timeout: float) -> dict[str, Any]:  # noqa: ASYNC109
        """Send the client a request and return its response message.

        Raises ChannelClosed when the client cannot be reached, TimeoutError when it does not answer.
        """


class ClientSettings(Protocol):
    """Where what a client chose during its session is kept (its session store, or the stdio client)."""

    async def set_log_level(self, session_id: str, level: str) -> None:
        """Remember the client's `logging/setLevel` for its later requests."""


@dataclass(slots=True)
class RequestContext:
    """Everything the dispatcher needs about one request, and what it reports back for the log."""

    principal: Principal
    tenant: TenantConfig
    request_id: str
    protocol_version: str
    session_id: str | None = None
    method: str | None = None
    channel: Channel | None = None  # this request's way back to its client
    capabilities: frozenset[str] = frozenset()  # relayable flags the client declared (protocol.capabilities)
    log_level: str | None = None  # the client's logging/setLevel, None until it sets one
    settings: ClientSettings | None = None  # where a new log level is kept
    # filled in by the dispatcher for the canonical log line and metrics
    tool: str | None = None
    backend: str | None = None
    target: str | None = None  # the called item's own name (or URI) at its backend, for the audit record
    outcome: str = "ok"
    extra: dict[str, Any] = field(default_factory=dict)
    # The request's W3C trace (gateway.tracing.context): the one its log line, metrics exemplars and audit
    # record name. Tracing off: the client's, passed on to backends as it came (or a new one); on: its span's.
    traceparent: str | None = None
    tracestate: str | None = None  # passed on with traceparent while tracing is off
    span: RequestSpan | None = None  # the request's SERVER span (or the sampler's no) while tracing is on
    envelope: Envelope | None = None  # a 2026-07-28 request's own version and client capabilities; None: a session's
    # A 2026 tools/call, prompts/get, resources/read or tasks/* request's sealed states (transport.rounds):
    seal: StateSeal | None = None  # what seals and opens them (None: no seal on this transport)
    params: JsonObject | None = None  # the request's own params: what a state sealed for its client is bound to
    passed: Passed | None = None  # a retry's: the 2026 backend's own state it carried back
    server: VirtualServer | None = None  # the virtual server asked (`/servers/<name>/mcp`); None: the gateway's own
    # for the audit record: the session's client as initialize named it (audit.client_of; a 2026 request's envelope
    # says its own), and the request's size in bytes as it came (0: not known apart, as for a batch member)
    client: dict[str, str] | None = None
    size: int = 0


def resolve_tenant(principal: Principal, tenants: Mapping[str, TenantConfig]) -> TenantConfig:
    """The tenant policy for a principal; an unknown tenant is forbidden."""
    tenant = tenants.get(principal.tenant)
    if tenant is None:
        raise Forbidden("Forbidden: unknown tenant")
    return tenant


def upstream_headers(backend: BackendConfig, tenant: TenantConfig, principal: Principal) -> dict[str, str]:
    """This call's headers for a backend: the tenant's overrides, then the identity headers if the
    backend asked for them. The upstream lays them over the backend's own configured `headers`
    (case-insensitively), so those are not merged here again.

    The client's own token is never among them.
    """
    headers = dict(tenant.backend_headers.get(backend.name, {}))
    if isinstance(backend, HttpBackend) and backend.identity_headers:  # stdio backends get no headers
        identity = {"X-MCP-Tenant": principal.tenant, "X-MCP-Subject": principal.subject}
        _override(headers, {name: _header_safe(value) for name, value in identity.items()})
    return headers


def _header_safe(value: str) -> str:
    """Control characters percent-encoded: a token's `sub` must not write headers of its own."""
    return _CONTROL.sub(lambda m: f"%{ord(m.group()):02X}", value)


def _override(headers: dict[str, str], layer: Mapping[str, str]) -> None:
    """Header names are case-insensitive: `authorization` replaces `Authorization`, never joins it."""
    for name, value in layer.items():
        for existing in [k for k in headers if k.lower() == name.lower()]:
            del headers[existing]
        headers[name] = value
