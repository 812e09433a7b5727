"""A call whose user has not yet authorized the gateway at a user_oauth backend: sending them to do it.

A client that declared URL-mode elicitation (MCP 2025-11-25) is asked through its request's
channel: a handshake-era client gets an `elicitation/create` (mode url, with an elicitationId),
a 2026-07-28 client an InputRequiredResult carrying it (transport.rounds holds the call meanwhile).
The URL is the gateway's own `/oauth/connect/...` link (gateway.oauth.flows), never the
authorization server's. Once the user accepts, the call waits up to `oauth.wait_seconds` for the
grant (the browser round trip may end on another replica: the store is polled), then goes on as
if it had been there all along. A client that cannot be asked, or whose user does not finish in
time, gets the link in a tool error (tools/call) or a `-32042` URLElicitationRequired error (a
handshake-era client that declared URL elicitation), else a JSON-RPC error naming the link.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from gateway.oauth.flows import Link
from gateway.oauth.outbound import AuthorizationRequired, BackendCredentials
from gateway.protocol import spec
from gateway.protocol.capabilities import ELICITATION_URL, declared
from gateway.protocol.errors import AuthorizationPending, UrlElicitationRequired
from gateway.protocol.jsonrpc import JsonObject
from gateway.tenancy import ChannelClosed, RequestContext

log = structlog.get_logger("gateway.dispatch")

POLL_SECONDS = 0.25
ELICITATION_COMPLETE = "notifications/elicitation/complete"


class Connect:
    """Sends users to authorize the gateway (see the module docstring)."""

    def __init__(self, credentials: BackendCredentials, *, wait_seconds: float) -> None:
        self.credentials = credentials
        self.wait_seconds = wait_seconds

    async def authorized(self, needed: AuthorizationRequired, method: str, ctx: RequestContext) -> JsonObject | None:
        """None once the user has authorized (the call goes on); else the tool error to answer a tools/call
        with. Other methods get UrlElicitationRequired or AuthorizationPending raised."""
        link, message = needed.link, _message(needed.link)
        ctx.outcome = "authorization_required"
        answer = await self._ask(link, message, ctx) if ELICITATION_URL in _flags(ctx) else None
        if answer == "accept":
            if await self._granted(link, ctx):
                ctx.outcome = "ok"
                await self._completed(link, ctx)
                return None
            message = f"{message} It was not completed within {self.wait_seconds:g} s: try the call again after it is."
        elif answer is not None:  # decline or cancel: the user said no
            message = f"Authorization of {link.backend} was declined; {message[0].lower()}{message[1:]}"
        if method == spec.TOOLS_CALL:
            return {"content": [{"type": "text", "text": message}], "isError": True}
        if ctx.envelope is None and ELICITATION_URL in _flags(ctx):
            raise UrlElicitationRequired(message, _elicitation(link, message))
        raise AuthorizationPending(message, backend=link.backend, url=link.url)

    async def _ask(self, link: Link, message: str, ctx: RequestContext) -> str | None:
        """The user's action (accept, decline, cancel), or None if the client could not be asked."""
        if ctx.channel is None:
            return None
        try:
            reply = await ctx.channel.ask(spec.ELICITATION_CREATE, _elicitation(link, message),
                                          timeout=self.wait_seconds)
        except (ChannelClosed, TimeoutError):
            return None
        result = reply.get("result")
        action = result.get("action") if isinstance(result, dict) else None
        return action if action in ("accept", "decline", "cancel") else None

    async def _granted(self, link: Link, ctx: RequestContext) -> bool:
        grants = self.credentials.grants
        assert grants is not None
        deadline = time.monotonic() + self.wait_seconds
        while True:
            if await grants.load(ctx.principal.tenant, ctx.principal.subject, link.backend) is not None:
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(POLL_SECONDS)

    async def _completed(self, link: Link, ctx: RequestContext) -> None:
        """MCP 2025-11-25: the client may hear that the out-of-band step is done (2026 learns it by its retry)."""
        if ctx.envelope is None and ctx.channel is not None:
            try:
                await ctx.channel.notify({"jsonrpc": "2.0", "method": ELICITATION_COMPLETE,
                                          "params": {"elicitationId": link.id}})
            except ChannelClosed:
                log.debug("elicitation_complete_undelivered", backend=link.backend)


def _flags(ctx: RequestContext) -> frozenset[str]:
    return declared(ctx.envelope.client_capabilities) if ctx.envelope is not None else ctx.capabilities


def _message(link: Link) -> str:
    return (f"Connect your {link.backend} account to the gateway: open {link.url} in your browser "
            f"and authorize it.")


def _elicitation(link: Link, message: str) -> JsonObject:
    return {"mode": "url", "message": message, "url": link.url, "elicitationId": link.id}
