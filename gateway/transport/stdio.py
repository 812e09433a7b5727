"""`mcp-gateway stdio`: the gateway for one local client over stdin/stdout.

Newline-delimited JSON-RPC, one message per line. Only protocol messages go to stdout:
the real stdout is kept for them and fd 1 is pointed at stderr, so a stray print (ours,
a library's) cannot corrupt the stream; logs go to stderr. There are no sessions: the
protocol version comes from `initialize`, and the caller is fixed at start by the token
in MCP_GATEWAY_TOKEN (re-checked on every request, so an expired token stops working).
Tenant rate limits are not applied: the one client is local.

Each request runs as its own task, so a slow tool call never holds up a ping, and
`notifications/cancelled` cancels the matching task. Ending:
- EOF on stdin: requests in flight finish (up to `server.shutdown_grace_seconds`), then exit 0;
- SIGTERM/SIGINT, or stdout gone (broken pipe): in-flight requests are cancelled, exit 0;
  a second signal forces the exit (status 1). Backends are always stopped before exit.
"""

from __future__ import annotations

import asyncio
import enum
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from gateway import lifecycle
from gateway.auth.authenticator import Authenticator
from gateway.catalogue.merge import Catalogue
from gateway.catalogue.refresher import CatalogueListener
from gateway.catalogue.views import ViewCache
from gateway.components import Components, build_components, kill_children
from gateway.config import Config, TenantConfig
from gateway.dispatch import Dispatcher
from gateway.errors import Forbidden, GatewayError, InvalidRequest, Unauthorized
from gateway.logs import RequestIds, configure_logging
from gateway.protocol import jsonrpc, spec
from gateway.protocol.jsonrpc import JsonObject, Message
from gateway.tenancy import Principal, RequestContext, resolve_tenant

log = structlog.get_logger("gateway.stdio")

TOKEN_ENV = "MCP_GATEWAY_TOKEN"
EXIT_REFUSED = 2
EXIT_FORCED = 1
STARTUP_WAIT_SECONDS = 15.0
"""Longest wait for the first catalogue build before answering; list_changed covers a later one."""
FORCED_EXIT_SECONDS = 1.0
READ_CHUNK = 65536


class End(enum.Enum):
    """Why the session ends."""

    EOF = "eof"
    SIGNAL = "signal"
    BROKEN_PIPE = "broken_pipe"


class StartRefused(Exception):
    """The gateway cannot serve this client; the message says what to fix."""


def serve_stdio(config: Config) -> int:
    """Run stdio mode until the client goes; returns the exit status."""
    configure_logging(config.logging, stream=sys.stderr)
    if not config.backends:
        return _refuse("no backend is configured: add at least one under `backends:` in the config")
    return lifecycle.run(_main(config, _claim_stdout()))


def _refuse(reason: str) -> int:
    print(f"error: {reason}", file=sys.stderr)
    return EXIT_REFUSED


def _claim_stdout() -> int:
    """Keep the real stdout for protocol messages; anything else written to fd 1 lands on stderr."""
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    return protocol_fd


async def _main(config: Config, out_fd: int) -> int:
    core = build_components(config, list_changed=True)
    try:
        caller = await resolve_caller(config, core.authenticator)
    except StartRefused as exc:
        await core.authenticator.close()
        return _refuse(str(exc))
    session = StdioSession(dispatcher=core.dispatcher, authenticator=core.authenticator, caller=caller,
                           write=FdWriter(out_fd).write)
    core.catalogue.subscribe(session.list_changed_listener(core.catalogue.views))
    signals = lifecycle.ShutdownSignals()
    signals.install()
    signals.on_request(lambda: session.end(End.SIGNAL))
    start_reader(0, session, asyncio.get_running_loop(), config.server.max_body_bytes)
    log.info("stdio_starting", tenant=caller.tenant.name, subject=caller.principal.subject,
             backends=len(config.backends))
    try:
        await _serve(core, session, signals, grace=config.server.shutdown_grace_seconds)
    finally:
        cleaned = await lifecycle.finish_cleanup(core.close(), forced=signals.forced,
                                                 after_force=FORCED_EXIT_SECONDS,
                                                 on_force=lambda: kill_children(core.pool))
        signals.remove()
    forced = signals.forced.is_set() or not cleaned
    log.info("stdio_stopped", reason=(session.ended or End.SIGNAL).value, requests=session.requests, forced=forced)
    return EXIT_FORCED if forced else 0


async def _serve(core: Components, session: StdioSession, signals: lifecycle.ShutdownSignals, *,
                 grace: float) -> None:
    """Start the backends, give the first catalogue a moment, then answer the client until it goes.

    A signal while the backends start skips the rest (the client is leaving anyway).
    """
    if not await lifecycle.wait_unless(core.start(), cancel_on=signals.requested, timeout=None):
        return
    await lifecycle.wait_unless(core.catalogue.ready.wait(), cancel_on=signals.requested,
                                timeout=STARTUP_WAIT_SECONDS)
    await session.serve(grace=grace)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who this process serves, fixed at start."""

    principal: Principal
    tenant: TenantConfig
    token: str | None  # verified again on every request; None for auth.anonymous_tenant


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


# ---------------------------------------------------------------- the session


class StdioSession:
    """One local client: reads its lines, runs each request as a task, writes the replies."""

    def __init__(self, *, dispatcher: Dispatcher, authenticator: Authenticator, caller: Caller,
                 write: Callable[[bytes], None]) -> None:
        self.dispatcher = dispatcher
        self.authenticator = authenticator
        self.caller = caller
        self.write = write
        self.protocol_version: str = spec.LATEST_VERSION  # until initialize says otherwise
        self.initialized = False
        self.requests = 0
        self._request_ids = RequestIds()
        self.ended: End | None = None
        self._lines: asyncio.Queue[bytes | End] = asyncio.Queue()
        self._hurry = asyncio.Event()  # set when in-flight requests must not be waited for
        self._inflight: dict[jsonrpc.RequestId, asyncio.Task[None]] = {}
        self._stdout_gone = False

    # --- input, fed by the reader thread through the loop

    def feed(self, line: bytes) -> None:
        self._lines.put_nowait(line)

    def end(self, reason: End) -> None:
        if reason is not End.EOF:
            self._hurry.set()
        self._lines.put_nowait(reason)

    def oversize(self, limit: int) -> None:
        self._send(jsonrpc.error_response(None, InvalidRequest(f"Invalid Request: message over {limit} bytes")))

    async def serve(self, *, grace: float) -> End:
        """Answer lines until the end; then let requests finish (EOF) or cancel them."""
        while not isinstance(item := await self._lines.get(), End):
            self._on_line(item)
        self.ended = item
        log.info("stdio_ending", reason=item.value, in_flight=len(self._inflight))
        await self._finish(item, grace)
        return item

    async def _finish(self, reason: End, grace: float) -> None:
        tasks = list(self._inflight.values())
        if tasks and reason is End.EOF:
            await lifecycle.wait_unless(asyncio.gather(*tasks, return_exceptions=True),
                                        cancel_on=self._hurry, timeout=grace)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- messages

    def _on_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            data = jsonrpc.loads(line)
        except GatewayError as exc:
            self._send(jsonrpc.error_response(None, exc))
            return
        if isinstance(data, list):
            self._spawn(None, self._answer_batch(data))
            return
        try:
            message = jsonrpc.parse_message(data)
        except GatewayError as exc:
            self._send(jsonrpc.error_response(jsonrpc.id_of(data), exc))
            return
        self._on_message(message)

    def _on_message(self, message: Message) -> None:
        if message.is_request:
            self._spawn(message.id, self._answer(message))
        elif message.method == spec.CANCELLED:
            self._cancel((message.params or {}).get("requestId"))
        elif message.method == spec.INITIALIZED:
            self.initialized = True
        # other notifications and responses (we send no requests) need no answer

    def _spawn(self, request_id: jsonrpc.RequestId | None, work: Any) -> None:
        task = asyncio.create_task(work)
        key = request_id if request_id is not None else id(task)  # batches are not cancellable by id
        self._inflight[key] = task
        task.add_done_callback(lambda done: self._forget(key, done))

    def _forget(self, key: jsonrpc.RequestId, task: asyncio.Task[None]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]

    def _cancel(self, request_id: Any) -> None:
        task = self._inflight.get(request_id) if isinstance(request_id, str | int) else None
        if task is not None:  # no reply follows a cancelled request (spec: cancellation)
            task.cancel()

    async def _answer(self, message: Message) -> None:
        self._send(await self._reply(message))

    async def _reply(self, message: Message) -> JsonObject | None:
        assert message.id is not None
        if message.method == spec.INITIALIZE:
            self.protocol_version = spec.negotiate_version((message.params or {}).get("protocolVersion"))
        self.requests += 1
        ctx = self._context(message.method)
        started = time.perf_counter()
        try:
            ctx.principal = await self._authenticate()
            return await self.dispatcher.handle(message, ctx)
        except Unauthorized as exc:
            ctx.outcome = "unauthorized"
            return jsonrpc.error_response(message.id, exc)
        finally:
            _log_request(ctx, time.perf_counter() - started)

    async def _answer_batch(self, items: list[Any]) -> None:
        """JSON-RPC batches, as on HTTP: only for clients that negotiated 2025-03-26."""
        if not items or self.protocol_version not in spec.BATCH_VERSIONS:
            error = InvalidRequest(f"Invalid Request: batches are not allowed in {self.protocol_version}"
                                   if items else "Invalid Request: empty batch")
            self._send(jsonrpc.error_response(None, error))
            return
        replies = await asyncio.gather(*(self._batch_item(item) for item in items))
        answered = [reply for reply in replies if reply is not None]
        if answered:
            self._send(answered)

    async def _batch_item(self, item: Any) -> JsonObject | None:
        message = jsonrpc.parse_batch_item(item, not_batchable=spec.INITIALIZE)
        if not isinstance(message, Message):
            return message  # the member's error reply
        if not message.is_request:
            self._on_message(message)
            return None
        return await self._reply(message)

    async def _authenticate(self) -> Principal:
        """Every request is authenticated: an expired or revoked token stops working mid-session."""
        if self.caller.token is None:
            return self.caller.principal  # the configured anonymous tenant
        return await self.authenticator.principal_for(self.caller.token)

    def _context(self, method: str | None) -> RequestContext:
        return RequestContext(principal=self.caller.principal, tenant=self.caller.tenant,
                              request_id=self._request_ids(), protocol_version=self.protocol_version,
                              method=method, notify=self._notify)

    # --- output

    async def _notify(self, notification: JsonObject) -> None:
        self._send(notification)

    def _send(self, message: JsonObject | list[JsonObject] | None) -> None:
        if message is None or self._stdout_gone:
            return
        try:
            self.write(jsonrpc.dumps(message) + b"\n")
        except OSError as exc:  # EPIPE above all: the client closed its end
            self._stdout_gone = True
            log.info("stdio_client_gone", error=exc.strerror or str(exc))
            self.end(End.BROKEN_PIPE)

    def list_changed_listener(self, views: ViewCache) -> CatalogueListener:
        """Tell the client to list tools again when the tools it can see change."""

        async def listener(old: Catalogue, new: Catalogue) -> None:
            if self.initialized and views.tenants_changed(old, new, [self.caller.tenant]):
                self._send({"jsonrpc": "2.0", "method": spec.TOOLS_LIST_CHANGED})

        return listener


def _log_request(ctx: RequestContext, seconds: float) -> None:
    """The canonical request line, as the HTTP transport writes it (here on stderr)."""
    log.info("request", request_id=ctx.request_id, transport="stdio", tenant=ctx.principal.tenant,
             subject=ctx.principal.subject, method=ctx.method, tool=ctx.tool, backend=ctx.backend,
             outcome=ctx.outcome, duration_ms=round(seconds * 1000, 3))


# ---------------------------------------------------------------- the pipes


class FdWriter:
    """Blocking, unbuffered writes to the protocol fd.

    Unbuffered, so a reply is on the wire at once and nothing is left to flush (or to fail
    with EPIPE) at exit; blocking, so the fd's mode is never changed (with a terminal, it
    is shared with stderr). A client that stops reading stalls us, as with any stdio server.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]


class LineSplitter:
    """Splits a byte stream into lines; a line longer than `limit` is dropped and reported."""

    OVERSIZE = object()

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._skipping = False  # inside a line that is already over the limit

    def feed(self, chunk: bytes) -> list[Any]:
        """Complete lines (bytes) and OVERSIZE markers found so far."""
        self._buffer += chunk
        found: list[Any] = []
        while (newline := self._buffer.find(b"\n")) >= 0:
            line = bytes(self._buffer[:newline])
            del self._buffer[: newline + 1]
            if self._skipping:
                self._skipping = False
            elif len(line) > self.limit:
                found.append(self.OVERSIZE)
            else:
                found.append(line)
        if len(self._buffer) > self.limit and not self._skipping:
            self._buffer.clear()
            self._skipping = True
            found.append(self.OVERSIZE)
        elif self._skipping:
            self._buffer.clear()
        return found

    def rest(self) -> bytes:
        """A last line without its newline, at EOF."""
        return b"" if self._skipping else bytes(self._buffer)


def start_reader(fd: int, session: StdioSession, loop: asyncio.AbstractEventLoop, limit: int) -> threading.Thread:
    """Read `fd` in a daemon thread, handing lines to the session on its loop.

    A thread with plain blocking `os.read`: it never switches the fd to non-blocking mode
    (a terminal shares it with stderr), holds no Python I/O lock that could hang the
    interpreter's exit, and dies with the process when the session is over.
    """
    thread = threading.Thread(target=_read_lines, args=(fd, session, loop, limit), name="stdio-reader",
                              daemon=True)
    thread.start()
    return thread


def _read_lines(fd: int, session: StdioSession, loop: asyncio.AbstractEventLoop, limit: int) -> None:
    splitter = LineSplitter(limit)
    try:
        while chunk := _read(fd):
            for item in splitter.feed(chunk):
                if item is LineSplitter.OVERSIZE:
                    loop.call_soon_threadsafe(session.oversize, limit)
                else:
                    loop.call_soon_threadsafe(session.feed, item)
        if last := splitter.rest():
            loop.call_soon_threadsafe(session.feed, last)
        loop.call_soon_threadsafe(session.end, End.EOF)
    except RuntimeError:  # the loop is closed: the session ended for another reason
        return


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, READ_CHUNK)
    except OSError:  # a closed or broken stdin counts as EOF
        return b""
