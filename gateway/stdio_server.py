"""`mcp-gateway stdio`: the gateway for one local client over stdin/stdout.

Assembles what `server.py` assembles for HTTP (the components, the exchange core) around
the stdio transport. Only protocol messages go to stdout: the real stdout is kept for them
and fd 1 is pointed at stderr, so a stray print (ours, a library's) cannot corrupt the
stream; logs go to stderr. The caller is fixed at start by the token in MCP_GATEWAY_TOKEN.
Tenant rate limits are not applied: the one client is local.

Exit status: 0 when the client went (EOF, signal, broken pipe); 1 when a second signal forced
the exit; 2 when the gateway cannot serve this client (the message says what to fix).
Backends are always stopped before exit.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from gateway import lifecycle
from gateway.audit import AuditTrail, open_trail
from gateway.auth.authenticator import Authenticator
from gateway.components import Components, build_components, kill_children
from gateway.config import Config, TenantConfig
from gateway.config.server_model import VirtualServer
from gateway.logs import EventLog, configure_logging
from gateway.protocol.errors import Forbidden, Unauthorized
from gateway.shared_state import state_seal
from gateway.tenancy import Principal, resolve_tenant
from gateway.tracing import open_tracing
from gateway.transport.exchange import Exchange, to_both
from gateway.transport.rounds import Rounds
from gateway.transport.stdio.connection import End, StdioClient
from gateway.transport.stdio.pipes import FdWriter, start_reader

if TYPE_CHECKING:
    from gateway.tracing.spans import Tracing

log = structlog.get_logger("gateway.stdio")

TOKEN_ENV = "MCP_GATEWAY_TOKEN"
EXIT_REFUSED = 2
EXIT_FORCED = 1
STARTUP_WAIT_SECONDS = 15.0
"""Longest wait for the first catalogue build before answering; list_changed covers a later one."""
FORCED_EXIT_SECONDS = 1.0


class StartRefused(Exception):
    """The gateway cannot serve this client; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class Caller:
    """Who this process serves, fixed at start."""

    principal: Principal
    tenant: TenantConfig
    token: str | None  # verified again on every request; None for auth.anonymous_tenant


def serve_stdio(config: Config, server: str | None = None) -> int:
    """Run stdio mode until the client goes (served virtual server `server`, if named); returns the exit status."""
    events = configure_logging(config.logging, stream=sys.stderr)
    if not config.backends:
        return _refuse("no backend is configured: add at least one under `backends:` in the config")
    return lifecycle.run(_main(config, _claim_stdout(), events, server))


def _refuse(reason: str) -> int:
    print(f"error: {reason}", file=sys.stderr)
    return EXIT_REFUSED


def _claim_stdout() -> int:
    """Keep the real stdout for protocol messages; anything else written to fd 1 lands on stderr."""
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    return protocol_fd


async def _main(config: Config, out_fd: int, events: EventLog, server: str | None = None) -> int:
    tracing = open_tracing(config.tracing, on_dropped=_spans_dropped, on_exported=lambda count: None)
    trail = open_trail(config, on_dropped=_audit_dropped)  # its stdout sink writes to stderr here (_claim_stdout)
    if trail is not None:
        trail.start()
    try:
        return await _serve_client(config, out_fd, events, tracing, trail, server)
    finally:
        if trail is not None:
            await trail.close()
        if tracing is not None:
            await tracing.close()


def _spans_dropped(reason: str, count: int) -> None:
    """Stdio mode has no /metrics: lost spans are logged (to stderr)."""
    log.warning("trace_spans_dropped", reason=reason, count=count)


def _audit_dropped(sink: str, count: int) -> None:
    log.warning("audit_records_dropped", sink=sink, count=count)


async def _serve_client(config: Config, out_fd: int, events: EventLog, tracing: Tracing | None,
                        trail: AuditTrail | None = None, server: str | None = None) -> int:
    core = build_components(config, list_changed=True, tracing=tracing, audit=trail)
    try:
        caller = await resolve_caller(config, core.authenticator)
        served = _served(config, caller, server)
    except StartRefused as exc:
        await core.authenticator.close()
        return _refuse(str(exc))
    exchange = Exchange(dispatcher=core.dispatcher, authenticator=core.authenticator, tenants=config.tenants)
    rounds = Rounds.of(config, exchange, state_seal(config), replica="stdio")  # 2026 clients' questions
    client = StdioClient(exchange=exchange, tenant=caller.tenant, token=caller.token,
                         write=FdWriter(out_fd).write, events=events, rounds=rounds, tracing=tracing, server=served)
    core.catalogue.subscribe(exchange.list_changed_listener(to_both(client.deliver, core.listeners.publish),
                                                               lambda: [caller.tenant]))
    core.catalogue.relisting.watch(lambda: (caller.tenant.name,))  # stdout always takes notifications
    core.dispatcher.subscriptions.session_sink = lambda _session: client.send  # resource updates: stdout
    signals = lifecycle.ShutdownSignals()
    signals.install()
    signals.on_request(lambda: client.end(End.SIGNAL))
    start_reader(0, client, asyncio.get_running_loop(), config.server.max_body_bytes)
    log.info("stdio_starting", tenant=caller.tenant.name, subject=caller.principal.subject,
             backends=len(config.backends))
    try:
        await _serve(core, client, signals, grace=config.server.shutdown_grace_seconds)
    finally:
        await rounds.close()  # calls held for a 2026 client's answers end at their backends
        cleaned = await lifecycle.finish_cleanup(core.close(), forced=signals.forced,
                                                 after_force=FORCED_EXIT_SECONDS,
                                                 on_force=lambda: kill_children(core.pool))
        signals.remove()
    forced = signals.forced.is_set() or not cleaned
    log.info("stdio_stopped", reason=(client.ended or End.SIGNAL).value, requests=client.requests, forced=forced)
    return EXIT_FORCED if forced else 0


async def _serve(core: Components, client: StdioClient, signals: lifecycle.ShutdownSignals, *,
                 grace: float) -> None:
    """Start the backends, give the first catalogue a moment, then answer the client until it goes.

    A signal while the backends start skips the rest (the client is leaving anyway).
    """
    if not await lifecycle.wait_unless(core.start(), cancel_on=signals.requested, timeout=None):
        return
    await lifecycle.wait_unless(core.catalogue.ready.wait(), cancel_on=signals.requested,
                                timeout=STARTUP_WAIT_SECONDS)
    await client.serve(grace=grace)


async def resolve_caller(config: Config, authenticator: Authenticator) -> Caller:
    """The caller from MCP_GATEWAY_TOKEN (an API key or a JWT), or auth.anonymous_tenant without one."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if token:
        try:
            principal = await authenticator.principal_for(token)
        except Unauthorized:
            raise StartRefused(f"{TOKEN_ENV} is not a valid token (API key or JWT) for this gateway") from None
    elif config.auth.anonymous_tenant:
        principal = Principal(config.auth.anonymous_tenant, "anonymous")
    else:
        raise StartRefused(f"no token: set {TOKEN_ENV} to an API key or a JWT, "
                           "or configure auth.anonymous_tenant for local use without one")
    try:
        return Caller(principal, resolve_tenant(principal, config.tenants), token or None)
    except Forbidden:
        raise StartRefused(f"the token's tenant {principal.tenant!r} is not configured under `tenants:`") from None


def _served(config: Config, caller: Caller, name: str | None) -> VirtualServer | None:
    """The virtual server `--server` names, if it admits the caller's tenant."""
    if name is None:
        return None
    server = config.servers.get(name)
    if server is None or not server.admits(caller.tenant.name):
        raise StartRefused(f"no virtual server {name!r} under `servers:` admits tenant {caller.tenant.name!r}")
    return server
