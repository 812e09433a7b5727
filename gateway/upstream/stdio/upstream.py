"""The stdio upstream: a supervised child process speaking newline-delimited JSON-RPC.

One child per backend serves every `session_key`: a stdio server talks to exactly one
client, and a child per tenant would multiply processes; so stdio backends see the
gateway as their one client, and tenant separation is the gateway's policy alone.
`headers` are ignored (stdio credentials come from the configured `env`). The child is told
every capability the gateway can relay (it cannot be told per client); the call's `on_request`
handler answers for the client served. A stdio backend's request (sampling, elicitation, roots)
or log line names no call: it goes to the one call that relays, if just one (stdio/calls.py);
its resources/updated goes to `on_resource_updated` with no tenant (the child serves them all).
A 2026 child's list changes and resource updates come on listen requests instead (stdio/listen.py).

Concurrent requests share the pipe: each gets a fresh upstream id and an inbox that the
reader task fills with its progress notifications and, last, its response. The caller
drains its own inbox, so a slow notification handler never stalls other requests.
A supervisor task restarts a dead child with exponential backoff; while it is down,
requests fail at once with `unavailable`. To cancel a request, cancel the task awaiting
`request()`: the child then gets `notifications/cancelled` with the upstream id.

Its parts: stdio/process.py (spawning, stderr, stopping the child), stdio/lines.py
(reading stdout a line at a time within the size limit), stdio/calls.py (the calls in flight
and their inboxes), stdio/eras.py and stdio/listen.py (the 2026 era and its listen requests).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from functools import partial
from typing import Any

import orjson
import structlog

from gateway.protocol.capabilities import NONE, RELAYED_METHODS
from gateway.protocol.errors import FailureReason
from gateway.protocol.spec import CANCELLED, INITIALIZE, LATEST_VERSION, LIST_CHANGED, MESSAGE, PROGRESS
from gateway.upstream.base import (
    MAX_RESPONSE_BYTES,
    SESSION_NOTICES,
    BackgroundTasks,
    Backoff,
    JsonObject,
    ListChangedCallback,
    ListChangedCallbacks,
    NotificationHandler,
    RequestHandler,
    ResourceUpdatedCallback,
    ResourceUpdates,
    UpstreamError,
    answer_backend_request,
    handshake_params,
    message_kind,
    notification_message,
    progress_token,
    request_message,
    swap_progress_token,
)
from gateway.upstream.stdio.calls import Calls, Pending
from gateway.upstream.stdio.eras import AUTO, StdioEras
from gateway.upstream.stdio.exits import STDERR_DRAIN, ExitReport
from gateway.upstream.stdio.lines import leading_id, next_line
from gateway.upstream.stdio.listen import subscription_id
from gateway.upstream.stdio.process import Process, cancel_tasks, child_env, forward_stderr, spawn, stop_process

HEALTHY_AFTER = 60.0
"""A child that ran this long resets the restart backoff."""
NOTIFY_TIMEOUT = 5.0
"""Seconds a best-effort write (notification, cancel, refusal) may take."""

_log = structlog.get_logger("gateway.upstream")


class StdioUpstream(StdioEras):
    """An MCP backend run as a child process over stdin/stdout, in either protocol era (stdio/eras.py)."""

    def __init__(self, name: str, *, command: Sequence[str], env: Mapping[str, str], cwd: str | None = None,
                 protocol_version: str = LATEST_VERSION, client_info: Mapping[str, Any], start_timeout: float = 30.0,
                 restart_delays: tuple[float, float] = (0.5, 30.0), max_line: int = MAX_RESPONSE_BYTES,
                 on_restart: Callable[[str], None] | None = None, protocol: str = AUTO) -> None:
        self.name = name
        self._on_restart = on_restart  # told the backend's name each time a dead child is started again
        self.protocol_version: str | None = None  # negotiated by the current child
        self.server_capabilities: JsonObject = {}  # declared by the current child
        self._command = list(command)
        self._env = child_env(env)
        self._cwd = cwd
        self._requested_version = protocol_version
        self._client_info = dict(client_info)
        self._start_timeout = start_timeout
        self._restart_delays = restart_delays
        self._max_line = max_line
        self._process: Process | None = None
        self._ready = False
        self._mute = False  # the current child's stdout is closed: nothing sent to it can be answered
        self._closing = False
        self._attempted = asyncio.Event()
        self._supervisor: asyncio.Task[None] | None = None
        self._calls = Calls()
        self._write_lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._tasks = BackgroundTasks(name)
        self._list_changed = ListChangedCallbacks(self._tasks)
        self._updates = ResourceUpdates()  # with no session key: the child serves every tenant
        self._exits = ExitReport()  # why the last child ended: for logs, errors and /admin/backends
        self._init_eras(protocol, client_info)

    @property
    def pid(self) -> int | None:
        """The serving child's process id, or None while it is down."""
        return self._process.pid if self._ready and self._process is not None else None

    # --- the Upstream protocol ----------------------------------------------------------

    async def start(self) -> None:
        """Start the supervisor and wait for the first spawn and handshake, failed or not."""
        if self._supervisor is None:
            self._closing = False
            self._supervisor = asyncio.create_task(self._supervise(), name=f"stdio:{self.name}")
        await self._attempted.wait()

    async def request(
        self,
        method: str,
        params: JsonObject | None,
        *,
        timeout: float | None,  # noqa: ASYNC109 - the per-call budget; None: the caller bounds it
        session_key: str = "",
        headers: Mapping[str, str] | None = None,
        on_notification: NotificationHandler | None = None,
        capabilities: frozenset[str] = NONE,
        on_request: RequestHandler | None = None,
    ) -> JsonObject:
        if not self._ready or self._process is None:
            why = f" ({self._exits.last})" if self._exits.last else ""
            raise UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: backend process is not running{why}",
                                sent=False)
        if self._modern:
            return await self._modern_request(self._process, method, params, timeout,
                                              (on_notification, on_request), capabilities)
        return await self._call(self._process, method, handshake_params(params), timeout, (on_notification, on_request))

    async def notify(self, method: str, params: JsonObject | None, *, session_key: str = "",
                     capabilities: frozenset[str] = NONE) -> None:
        if self._ready and self._process is not None:
            await self._write_quietly(self._process, notification_message(method, params))

    def on_list_changed(self, callback: ListChangedCallback) -> None:
        self._list_changed.add(callback)

    def on_resource_updated(self, callback: ResourceUpdatedCallback) -> None:
        self._updates.add(callback)

    async def close(self) -> None:
        self._closing = True
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            supervisor.cancel()  # its cleanup stops the child gracefully
            await asyncio.gather(supervisor, return_exceptions=True)
        if self._process is not None:  # the cleanup itself was interrupted
            await stop_process(self._process)
            self._process = None
        await self._tasks.cancel_all()

    # --- one request --------------------------------------------------------------------

    async def _call(
        self,
        process: Process,
        method: str,
        params: JsonObject | None,
        timeout: float | None,  # noqa: ASYNC109 - the per-call budget; None: the caller bounds it
        handlers: tuple[NotificationHandler | None, RequestHandler | None],
        *,
        listens: bool = False,
    ) -> JsonObject:
        on_notification, on_request = handlers
        if self._mute:  # e.g. the era fallback after a child died answering initialize: fail now, not at the deadline
            raise UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: backend process exited", sent=False)
        request_id = next(self._ids)
        token = f"{self.name}-{request_id}"  # unique across this child's active requests
        params, original = swap_progress_token(params, token)
        pending = Pending(original, on_request, listens=listens)
        self._calls.add(request_id, token if original is not None else None, pending)
        answered = False
        try:
            async with asyncio.timeout(timeout):
                await self._write(process, request_message(request_id, method, params))
                reply = await pending.answer(on_notification, self.name)
                answered = True
                return reply
        except TimeoutError as exc:
            self._cancel_upstream(process, method, request_id)
            raise UpstreamError(FailureReason.TIMEOUT, f"{self.name}: {method} timed out ({timeout}s)") from exc
        except asyncio.CancelledError:
            self._cancel_upstream(process, method, request_id)
            raise
        finally:
            self._calls.remove(request_id, token, answered=answered)

    def _cancel_upstream(self, process: Process, method: str, request_id: int) -> None:
        if method == INITIALIZE:  # initialize must never be cancelled
            return
        params = {"requestId": request_id, "reason": "cancelled by the gateway"}
        message = notification_message(CANCELLED, params)
        self._tasks.spawn(self._write_quietly(process, message), "cancel")

    # --- writing ------------------------------------------------------------------------

    async def _write(self, process: Process, message: JsonObject) -> None:
        """Write one line; the lock keeps lines whole and drains in order."""
        if process.stdin is None or process.returncode is not None:
            raise UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: backend process is not running")
        line = orjson.dumps(message) + b"\n"
        try:
            async with self._write_lock:
                process.stdin.write(line)
                await process.stdin.drain()
        except ConnectionError as exc:
            raise UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: backend stdin closed") from exc

    async def _write_quietly(self, process: Process, message: JsonObject) -> None:
        """Best effort, bounded: a child that stopped reading stdin must not hold us."""
        with suppress(UpstreamError, TimeoutError):
            async with asyncio.timeout(NOTIFY_TIMEOUT):
                await self._write(process, message)

    # --- reading ------------------------------------------------------------------------

    async def _read_stdout(self, stdout: asyncio.StreamReader) -> None:
        while True:
            line = await next_line(stdout, self._line_too_long)
            if line is None:  # the child is gone (or mute): nothing pending, or sent later, can be answered
                self._ready, self._mute = False, True
                self._fail_pending()
                return
            self._on_line(line)

    def _line_too_long(self, head: bytes) -> None:
        """Fail the request the line answered, when its id is readable from the line's head."""
        request_id = leading_id(head)
        _log.warning("backend line too long, dropped", backend=self.name, id=request_id, limit=self._max_line)
        reason = f"{self.name}: reply over {self._max_line} bytes"
        self._calls.deliver(request_id, UpstreamError(FailureReason.BAD_RESPONSE, reason))

    def _on_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:  # e.g. a print() in the backend: log, keep serving
            text = line[:200].decode(errors="replace").rstrip()
            _log.warning("backend wrote a non-JSON line", backend=self.name, line=text)
            return
        for item in message if isinstance(message, list) else [message]:
            self._route(item)

    def _route(self, message: Any) -> None:
        kind = message_kind(message)
        if kind == "response":
            self._on_response(message)
        elif kind == "notification":
            self._on_notification(message)
        elif kind == "request":
            self._on_request(message)
        else:
            self._on_invalid(message)

    def _on_request(self, message: JsonObject) -> None:
        """Relay to the call it belongs to, if that is certain (stdio/calls.py)."""
        call, why = self._calls.owner()
        if message["method"] in RELAYED_METHODS and call is not None and self._process is not None:
            assert call.on_request is not None
            call.on_request(message, partial(self._write_quietly, self._process))
            return
        self._tasks.spawn(self._write_quietly_current(answer_backend_request(message, why)), "answer")

    def _on_invalid(self, message: Any) -> None:
        """E.g. a reply without `result` or `error`: if its id is pending, that call fails now."""
        request_id = message.get("id") if isinstance(message, dict) else None
        _log.warning("backend sent an invalid message", backend=self.name, id=repr(request_id)[:40])
        error = UpstreamError(FailureReason.BAD_RESPONSE, f"{self.name}: not a JSON-RPC response")
        self._calls.deliver(request_id, error)

    def _on_response(self, message: JsonObject) -> None:
        if not self._calls.deliver(message["id"], message):  # late (after a timeout), bogus, or a stopping child's
            (_log.warning if self._ready else _log.debug)("response to an unknown request", backend=self.name,
                                                           id=repr(message["id"]))

    def _on_notification(self, message: JsonObject) -> None:
        method, subscription = message["method"], subscription_id(message)
        if subscription is not None:  # a listen request's frame: to that request alone (stdio/listen.py)
            if not self._calls.deliver(subscription, message, listens=True):
                _log.debug("frame of no listen request dropped", backend=self.name, method=method)
            return
        if method in LIST_CHANGED:
            self._list_changed.fire(method)
            return
        if method in SESSION_NOTICES:
            self._updates.fire(None, message)
            return
        token = progress_token(message) if method == PROGRESS else None
        pending = self._calls.by_token.get(token) if isinstance(token, str) else None
        if method == MESSAGE:  # a log line names no call either (see stdio_calls)
            pending = self._calls.owner()[0]
        if pending is not None:
            pending.inbox.put_nowait(message)
        else:
            _log.debug("backend notification dropped", backend=self.name, method=method)

    async def _write_quietly_current(self, message: JsonObject) -> None:
        if self._process is not None:
            await self._write_quietly(self._process, message)

    # --- the child's life ---------------------------------------------------------------

    async def _supervise(self) -> None:
        """Run the child; when it dies, wait (backoff) and run it again, until close()."""
        loop = asyncio.get_running_loop()
        backoff = Backoff(*self._restart_delays)
        try:
            while not self._closing:
                started = loop.time()
                await self._run_child()
                self._attempted.set()
                if self._closing:
                    return
                if loop.time() - started >= HEALTHY_AFTER:
                    backoff.reset()
                delay = backoff.next()
                _log.warning("backend process down, restarting", backend=self.name, delay=delay,
                             reason=self._exits.last)
                await asyncio.sleep(delay)
                if self._on_restart is not None and not self._closing:
                    self._on_restart(self.name)
        finally:
            self._attempted.set()  # start() never waits for a supervisor that is gone

    async def _run_child(self) -> None:
        """Spawn, handshake and serve until the child exits; leave no child behind."""
        try:
            process = await spawn(self._command, env=self._env, cwd=self._cwd, line_limit=self._max_line)
        except (OSError, ValueError) as exc:
            self._exits.last = f"cannot start: {exc}"
            _log.error("cannot start backend", backend=self.name, error=str(exc))
            return
        self._process, self._mute = process, False
        assert process.stdout is not None and process.stderr is not None
        reader = self._tasks.spawn(self._read_stdout(process.stdout), "stdout")
        stderr = self._tasks.spawn(forward_stderr(self.name, process.stderr, self._exits.heard), "stderr")
        try:
            await self._serve(process, reader)
        finally:
            self._ready = False
            self._fail_pending()
            await stop_process(process)
            await asyncio.wait({stderr}, timeout=STDERR_DRAIN)  # its last words, usually the reason
            await cancel_tasks(reader, stderr)
            self._process = None
            if not self._closing:
                _log.warning("backend process exited", backend=self.name, reason=self._exits.exited(process.returncode))

    async def _serve(self, process: Process, reader: asyncio.Task[None]) -> None:
        if not await self._handshake(process):
            return
        self._ready = True
        self._serving_now()
        self._attempted.set()
        _log.info("backend started", backend=self.name, pid=process.pid)
        exited = asyncio.ensure_future(process.wait())
        try:  # stdout EOF also ends it: a child that closed stdout cannot answer
            await asyncio.wait({exited, reader}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            exited.cancel()

    async def _handshake(self, process: Process) -> bool:
        try:
            await self._open(process)
        except UpstreamError as exc:
            _log.error("backend handshake failed", backend=self.name, reason=exc.reason, error=str(exc))
            return False
        self._updates.started(None)
        return True

    def _fail_pending(self) -> None:
        self._serving.clear()  # the child is gone: listen requests wait for the next one
        self._calls.fail_all(lambda: UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: backend process exited"))
