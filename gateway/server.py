"""Running one HTTP gateway process: event loop, listening socket, signals, graceful drain.

Shutdown on the first SIGTERM/SIGINT (a second one forces the exit, status 1):
1. readiness turns false at once (`Readiness.start_draining`), so load balancers stop sending traffic;
   the socket stays open meanwhile so probes see the 503 and in-flight calls can finish;
   replies get `Connection: close` so keep-alive clients reconnect elsewhere;
2. once no request is in flight (GET streams aside), or `server.shutdown_grace_seconds`
   after the signal at the latest, the listening socket closes: new connections are refused;
3. `on_shutdown` ends the GET (SSE) streams cleanly; requests still running get
   FINAL_FLUSH_SECONDS to write their reply, then are cancelled;
4. `cleanup_ctx` ends upstream sessions (DELETE) and stops stdio children (each wait bounded);
5. one `gateway_stopped` log line gives the totals.

`--workers N` runs N such processes under one parent (gateway.supervisor).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import dataclass, field

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from gateway import keys, lifecycle
from gateway.app import create_app
from gateway.components import kill_children
from gateway.config import Config, ServerConfig
from gateway.logs import EventLog
from gateway.reload import RELOADER, ConfigSource
from gateway.transport.http.connections import Connections, GuardedListener, raise_open_file_limit

log = structlog.get_logger("gateway")

FINAL_FLUSH_SECONDS = 1.0
"""After the drain, how long requests still running get to write their reply before cancellation."""
FORCED_EXIT_SECONDS = 1.0
"""After a second signal, how long cleanup may still take before the process gives up on it."""
EXIT_FORCED = 1


@dataclass(slots=True)
class RequestTracker:
    """Counts requests in flight, so the drain knows when the last one is done.

    GET requests on the MCP path are left out: they are the long-lived SSE streams,
    which the shutdown ends itself rather than waiting for them.
    """

    stream_path: str
    draining: bool = False
    active: int = 0
    served: int = 0
    completed_while_draining: int = 0
    cancelled: int = 0
    _idle: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._idle.set()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "GET" and request.path == self.stream_path:
            return await handler(request)
        self._enter()
        try:
            response = await handler(request)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self._leave()
        if self.draining and not response.prepared:
            response.force_close()  # the client's next request opens a connection elsewhere
        return response

    def _enter(self) -> None:
        self.active += 1
        self._idle.clear()

    def _leave(self) -> None:
        self.active -= 1
        self.served += 1
        if self.draining:
            self.completed_while_draining += 1
        if self.active == 0:
            self._idle.set()


async def run_server(config: Config, *, reuse_port: bool = False, parent_pid: int | None = None,
                     events: EventLog | None = None, reload_source: ConfigSource | None = None) -> int:
    """Serve until a signal, then drain and stop; returns the exit status. SIGHUP reloads the config."""
    signals = lifecycle.ShutdownSignals()
    signals.install()
    app = create_app(config, events=events, reload_source=reload_source)
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, _reload, app)
    tracker = RequestTracker(config.server.path)
    app.middlewares.append(tracker.middleware)  # innermost: counts what reaches a handler
    connections = Connections.for_server(config.server, raise_open_file_limit())
    app.middlewares.append(connections.middleware)  # a handler runs: the headers' deadline is met
    app.on_shutdown.append(_end_streams)
    # handler_cancellation: a client that hangs up cancels its handler, so the upstream call is
    # cancelled too and the backend gets notifications/cancelled (aiohttp's default is to run on).
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=FINAL_FLUSH_SECONDS,
                           handler_cancellation=True, keepalive_timeout=config.server.idle_timeout_seconds)
    listener = GuardedListener(runner, connections)
    started = time.monotonic()
    status, drain_seconds = 0, 0.0
    try:
        drain_seconds = await _serve_until_signal(runner, listener, config.server, tracker, signals, reuse_port,
                                                  parent_pid)
    except OSError as exc:  # the port is taken, or the address is not ours
        log.error("gateway_cannot_listen", host=config.server.host, port=config.server.port, error=str(exc))
        status = 1
    finally:
        cleaned = await lifecycle.finish_cleanup(_close(listener, runner), forced=signals.forced,
                                                 after_force=FORCED_EXIT_SECONDS,
                                                 on_force=lambda: _kill_children(app))
        signals.remove()
        asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
    if signals.forced.is_set() or not cleaned:
        status = status or EXIT_FORCED
    _log_totals(app, tracker, signals, status, time.monotonic() - started, drain_seconds)
    return status


async def _serve_until_signal(runner: web.AppRunner, listener: GuardedListener, server: ServerConfig,
                              tracker: RequestTracker, signals: lifecycle.ShutdownSignals, reuse_port: bool,
                              parent_pid: int | None) -> float:
    """Start, listen, wait for the signal, drain; returns the drain's duration."""
    await runner.setup()  # starts the upstreams and the first catalogue build
    await _listen(listener, server, reuse_port)
    watchdog = asyncio.create_task(_watch_parent(parent_pid, signals)) if parent_pid else None
    try:
        await signals.requested.wait()
    finally:
        if watchdog is not None:
            watchdog.cancel()
    drain_started = time.monotonic()
    await _drain(runner.app, tracker, signals, server.shutdown_grace_seconds)
    return time.monotonic() - drain_started


async def _listen(listener: GuardedListener, server: ServerConfig, reuse_port: bool) -> None:
    await listener.start(server.host, server.port, reuse_port=reuse_port)
    lifecycle.settle_garbage_collector()
    log.info("gateway_listening", host=server.host, port=server.port, path=server.path, pid=os.getpid())


async def _close(listener: GuardedListener, runner: web.AppRunner) -> None:
    """New connections refused first, then aiohttp ends the open ones and the app cleans up."""
    listener.close()
    await runner.cleanup()


async def _drain(app: web.Application, tracker: RequestTracker, signals: lifecycle.ShutdownSignals,
                 grace: float) -> None:
    """Not ready from now on; wait for the requests in flight, up to the grace (or a forced stop)."""
    app[keys.READINESS].start_draining()
    tracker.draining = True
    log.info("gateway_draining", in_flight=tracker.active, grace_seconds=grace)
    if keys.EXCHANGE in app:  # listen streams end now, gracefully: their clients listen again elsewhere
        app[keys.EXCHANGE].dispatcher.listeners.close_all()
    idle = await lifecycle.wait_unless(tracker.wait_idle(), cancel_on=signals.forced, timeout=grace)
    if not idle:
        log.warning("gateway_drain_cut_short", in_flight=tracker.active, forced=signals.forced.is_set())


async def _end_streams(app: web.Application) -> None:
    """GET streams never end by themselves; end them so their handlers return (cleanly)."""
    streams = app.get(keys.STREAMS)
    if streams is not None:
        streams.close_all()


async def _watch_parent(parent_pid: int, signals: lifecycle.ShutdownSignals) -> None:
    """A worker whose parent died (SIGKILL, OOM) drains and exits instead of living on, orphaned."""
    while os.getppid() == parent_pid:  # noqa: ASYNC110 - no event tells a process its parent died
        await asyncio.sleep(1.0)
    signals.request("parent_exited")


def _reload(app: web.Application) -> None:
    """SIGHUP: reload the config (gateway.reload logs the outcome), once the app has started."""
    reloader = app.get(RELOADER)
    if reloader is None:
        log.warning("config_reload_ignored", reason="the gateway is still starting")
        return
    reloader.start("SIGHUP")


def _kill_children(app: web.Application) -> None:
    pool, reloader = app.get(keys.POOL), app.get(RELOADER)
    if pool is not None:
        retired = list(reloader.retired) if reloader is not None else []
        log.warning("killing_backend_processes", pids=kill_children([*pool, *retired]))


def _log_totals(app: web.Application, tracker: RequestTracker, signals: lifecycle.ShutdownSignals,
                status: int, uptime: float, drain_seconds: float) -> None:
    sessions = app.get(keys.SESSIONS)
    log.info("gateway_stopped", exit_status=status, reason=signals.reason, forced=signals.forced.is_set(),
             requests_served=tracker.served, completed_while_draining=tracker.completed_while_draining,
             requests_cancelled=tracker.cancelled, sessions_open=sessions.count() if sessions else 0,
             drain_seconds=round(drain_seconds, 3), uptime_seconds=round(uptime, 3), pid=os.getpid())
