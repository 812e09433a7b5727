"""Running the HTTP gateway: event loop, listening socket, signals, graceful drain, workers.

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

`--workers N` forks N such processes sharing the port (`SO_REUSEPORT`); the parent
supervises them (see `WorkerSupervisor`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from contextlib import suppress
from dataclasses import dataclass, field, replace

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from gateway import keys, lifecycle
from gateway.app import create_app
from gateway.components import kill_children
from gateway.config import Config, ServerConfig
from gateway.logs import EventLog, configure_logging

log = structlog.get_logger("gateway")

FINAL_FLUSH_SECONDS = 1.0
"""After the drain, how long requests still running get to write their reply before cancellation."""
FORCED_EXIT_SECONDS = 1.0
"""After a second signal, how long cleanup may still take before the process gives up on it."""
EXIT_FORCED = 1
EXIT_REFUSED = 2


def serve(config: Config, *, host: str | None = None, port: int | None = None, workers: int = 1) -> int:
    """`mcp-gateway serve`: one process, or a parent supervising `workers` forked ones."""
    events = configure_logging(config.logging)
    config = _with_address(config, host, port)
    if workers < 1:
        print("error: --workers must be at least 1", file=sys.stderr)
        return EXIT_REFUSED
    if workers == 1:
        return lifecycle.run(run_server(config, events=events))
    if not config.store.redis_url:
        print(f"error: --workers {workers} needs store.redis_url: sessions, rate limits and the catalogue "
              "live in each process's memory otherwise, and a client would reach a worker that does not "
              "know its session. Set store.redis_url (or MCPGW_STORE__REDIS_URL), or use --workers 1.",
              file=sys.stderr)
        return EXIT_REFUSED
    return WorkerSupervisor(config, workers, events).run()


def _with_address(config: Config, host: str | None, port: int | None) -> Config:
    server = replace(config.server, host=host if host is not None else config.server.host,
                     port=port if port is not None else config.server.port)
    return replace(config, server=server)


# ---------------------------------------------------------------- one serving process


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
                     events: EventLog | None = None) -> int:
    """Serve until a signal, then drain and stop; returns the exit status."""
    signals = lifecycle.ShutdownSignals()
    signals.install()
    app = create_app(config, events=events)
    tracker = RequestTracker(config.server.path)
    app.middlewares.append(tracker.middleware)  # innermost: counts what reaches a handler
    app.on_shutdown.append(_end_streams)
    # handler_cancellation: a client that hangs up cancels its handler, so the upstream call is
    # cancelled too and the backend gets notifications/cancelled (aiohttp's default is to run on).
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=FINAL_FLUSH_SECONDS,
                           handler_cancellation=True)
    started = time.monotonic()
    status, drain_seconds = 0, 0.0
    try:
        drain_seconds = await _serve_until_signal(runner, config.server, tracker, signals, reuse_port, parent_pid)
    except OSError as exc:  # the port is taken, or the address is not ours
        log.error("gateway_cannot_listen", host=config.server.host, port=config.server.port, error=str(exc))
        status = 1
    finally:
        cleaned = await lifecycle.finish_cleanup(runner.cleanup(), forced=signals.forced,
                                                 after_force=FORCED_EXIT_SECONDS,
                                                 on_force=lambda: _kill_children(app))
        signals.remove()
    if signals.forced.is_set() or not cleaned:
        status = status or EXIT_FORCED
    _log_totals(app, tracker, signals, status, time.monotonic() - started, drain_seconds)
    return status


async def _serve_until_signal(runner: web.AppRunner, server: ServerConfig, tracker: RequestTracker,
                              signals: lifecycle.ShutdownSignals, reuse_port: bool,
                              parent_pid: int | None) -> float:
    """Start, listen, wait for the signal, drain; returns the drain's duration."""
    await runner.setup()  # starts the upstreams and the first catalogue build
    await _listen(runner, server, reuse_port)
    watchdog = asyncio.create_task(_watch_parent(parent_pid, signals)) if parent_pid else None
    try:
        await signals.requested.wait()
    finally:
        if watchdog is not None:
            watchdog.cancel()
    drain_started = time.monotonic()
    await _drain(runner.app, tracker, signals, server.shutdown_grace_seconds)
    return time.monotonic() - drain_started


async def _listen(runner: web.AppRunner, server: ServerConfig, reuse_port: bool) -> None:
    site = web.TCPSite(runner, server.host, server.port, reuse_port=reuse_port or None)
    await site.start()
    lifecycle.settle_garbage_collector()
    log.info("gateway_listening", host=server.host, port=server.port, path=server.path, pid=os.getpid())


async def _drain(app: web.Application, tracker: RequestTracker, signals: lifecycle.ShutdownSignals,
                 grace: float) -> None:
    """Not ready from now on; wait for the requests in flight, up to the grace (or a forced stop)."""
    app[keys.READINESS].start_draining()
    tracker.draining = True
    log.info("gateway_draining", in_flight=tracker.active, grace_seconds=grace)
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


def _kill_children(app: web.Application) -> None:
    pool = app.get(keys.POOL)
    if pool is not None:
        log.warning("killing_backend_processes", pids=kill_children(pool))


def _log_totals(app: web.Application, tracker: RequestTracker, signals: lifecycle.ShutdownSignals,
                status: int, uptime: float, drain_seconds: float) -> None:
    sessions = app.get(keys.SESSIONS)
    log.info("gateway_stopped", exit_status=status, reason=signals.reason, forced=signals.forced.is_set(),
             requests_served=tracker.served, completed_while_draining=tracker.completed_while_draining,
             requests_cancelled=tracker.cancelled, sessions_open=sessions.count() if sessions else 0,
             drain_seconds=round(drain_seconds, 3), uptime_seconds=round(uptime, 3), pid=os.getpid())


# ---------------------------------------------------------------- workers


CRASH_LOOP_SECONDS = 10.0
"""A worker that dies sooner than this after its start is not restarted (it would only die again)."""
KILL_MARGIN_SECONDS = 10.0
"""Past the grace, how long the parent waits for draining workers before SIGKILLing them."""
POLL_SECONDS = 0.1


@dataclass(slots=True)
class _Worker:
    pid: int
    started: float


class WorkerSupervisor:
    """The parent of `--workers N`: forks the workers, restarts crashed ones, forwards signals, reaps.

    Each worker runs in its own process group, so a terminal's Ctrl-C reaches the parent
    only and every worker gets exactly one SIGTERM from it (two would force their exit);
    a SIGKILL past the deadline takes a worker's stdio children down with it.
    """

    def __init__(self, config: Config, count: int, events: EventLog | None = None) -> None:
        self.config = config
        self.count = count
        self.events = events
        self.workers: dict[int, _Worker] = {}
        self.status = 0
        self._signals: list[int] = []
        self._stopping = False
        self._deadline = float("inf")

    def run(self) -> int:
        if not os.environ.get(lifecycle.MULTIPROC_ENV):
            log.warning("workers_metrics_per_process", hint="call lifecycle.share_metrics_between_processes() "
                        "before prometheus_client loads, or /metrics shows one worker at a time")
        previous = {sig: signal.signal(sig, self._on_signal) for sig in lifecycle.SHUTDOWN_SIGNALS}
        log.info("workers_starting", workers=self.count, port=self.config.server.port, pid=os.getpid())
        try:
            for _ in range(self.count):
                self._spawn()
            while self.workers:
                self._handle_signals()
                self._reap()
                self._enforce_deadline()
                time.sleep(POLL_SECONDS)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        log.info("workers_stopped", exit_status=self.status)
        return self.status

    def _on_signal(self, signum: int, frame: object) -> None:
        self._signals.append(signum)  # handled by the main loop, never inside the handler

    def _handle_signals(self) -> None:
        while self._signals:
            name = signal.Signals(self._signals.pop(0)).name
            if self._stopping:
                log.warning("workers_forced", signal=name)
            else:
                log.info("workers_stopping", signal=name)
                self._begin_stop()
            self._send_all(signal.SIGTERM)  # a second SIGTERM forces the workers' exit

    def _begin_stop(self) -> None:
        self._stopping = True
        grace = self.config.server.shutdown_grace_seconds
        self._deadline = time.monotonic() + grace + KILL_MARGIN_SECONDS

    def _spawn(self) -> None:
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker: never returns into the parent's code
            _worker_main(self.config, parent, self.events)
        with suppress(OSError):  # the child does the same; whoever runs first wins the race
            os.setpgid(pid, pid)
        self.workers[pid] = _Worker(pid, time.monotonic())
        log.info("worker_started", worker_pid=pid)

    def _reap(self) -> None:
        while self.workers:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.workers.clear()
                return
            if pid == 0:
                return
            worker = self.workers.pop(pid, None)
            if worker is not None:
                self._on_exit(worker, os.waitstatus_to_exitcode(wait_status))

    def _on_exit(self, worker: _Worker, code: int) -> None:
        _mark_metrics_dead(worker.pid)
        if self._stopping:
            log.info("worker_exited", worker_pid=worker.pid, exit_status=code)
            if code != 0:
                self.status = 1
            return
        lived = time.monotonic() - worker.started
        log.error("worker_died", worker_pid=worker.pid, exit_status=code, lived_seconds=round(lived, 1))
        if lived >= CRASH_LOOP_SECONDS:
            self._spawn()
            return
        log.error("workers_crash_loop", hint="a worker died right after starting; stopping the others")
        self.status = 1
        self._begin_stop()
        self._send_all(signal.SIGTERM)

    def _enforce_deadline(self) -> None:
        if self.workers and time.monotonic() > self._deadline:
            log.error("workers_killed", pids=sorted(self.workers))
            self.status = 1
            for pid in self.workers:
                with suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)  # the worker and its stdio children
            self._deadline = float("inf")

    def _send_all(self, sig: signal.Signals) -> None:
        for pid in self.workers:
            with suppress(ProcessLookupError):
                os.kill(pid, sig)


def _worker_main(config: Config, parent: int, events: EventLog | None) -> None:
    """Body of a forked worker: its own process group and signal handlers, then serve."""
    status = 1
    try:
        os.setpgid(0, 0)
        for sig in lifecycle.SHUTDOWN_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)  # the loop installs its own; drop the parent's
        status = lifecycle.run(run_server(config, reuse_port=True, parent_pid=parent, events=events))
    except BaseException:  # whatever happens, the fork must not return into the parent's code
        log.exception("worker_failed")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _mark_metrics_dead(pid: int) -> None:
    """Drop a dead worker's live gauges from the aggregated metrics."""
    if not os.environ.get(lifecycle.MULTIPROC_ENV):
        return
    try:
        from prometheus_client import multiprocess
    except ImportError:  # pragma: no cover - a dependency, but metrics must not break shutdown
        return
    with suppress(OSError):
        multiprocess.mark_process_dead(pid)
