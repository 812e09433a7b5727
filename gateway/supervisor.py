"""`mcp-gateway serve`: one server process, or a parent supervising N forked workers.

`--workers N` forks N processes (gateway.server) sharing the port (`SO_REUSEPORT`); the
parent restarts a crashed worker, forwards shutdown signals and reaps them all. SIGHUP to the
parent reaches every worker, each of which reloads the config file itself; the parent reads it
too, so a worker it starts later begins with the config the others reloaded.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from contextlib import suppress
from dataclasses import dataclass, replace

import structlog

from gateway import lifecycle
from gateway.config import Config, ConfigError
from gateway.logs import EventLog, configure_logging
from gateway.reload import ConfigSource, restart_only_changes
from gateway.server import run_server

log = structlog.get_logger("gateway")

EXIT_REFUSED = 2


def serve(config: Config, *, host: str | None = None, port: int | None = None, workers: int = 1,
          source: ConfigSource | None = None) -> int:
    """`mcp-gateway serve`: one process, or a parent supervising `workers` forked ones.

    `source` reads the config file again (for reloads); --host and --port keep applying to it.
    """
    events = configure_logging(config.logging)
    config = _with_address(config, host, port)
    if source is not None:
        source = _addressed(source, host, port)
    if workers < 1:
        print("error: --workers must be at least 1", file=sys.stderr)
        return EXIT_REFUSED
    if workers == 1:
        return lifecycle.run(run_server(config, events=events, reload_source=source))
    if not config.store.redis_url:
        print(f"error: --workers {workers} needs store.redis_url: sessions, rate limits and the catalogue "
              "live in each process's memory otherwise, and a client would reach a worker that does not "
              "know its session. Set store.redis_url (or MCPGW_STORE__REDIS_URL), or use --workers 1.",
              file=sys.stderr)
        return EXIT_REFUSED
    return WorkerSupervisor(config, workers, events, source).run()


def _addressed(source: ConfigSource, host: str | None, port: int | None) -> ConfigSource:
    return lambda: _with_address(source(), host, port)


def _with_address(config: Config, host: str | None, port: int | None) -> Config:
    server = replace(config.server, host=host if host is not None else config.server.host,
                     port=port if port is not None else config.server.port)
    return replace(config, server=server)


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

    def __init__(self, config: Config, count: int, events: EventLog | None = None,
                 source: ConfigSource | None = None) -> None:
        self.config = config
        self.source = source
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
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (*lifecycle.SHUTDOWN_SIGNALS, signal.SIGHUP)}
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
            if name == "SIGHUP":
                self._reload()
                continue
            if self._stopping:
                log.warning("workers_forced", signal=name)
            else:
                log.info("workers_stopping", signal=name)
                self._begin_stop()
            self._send_all(signal.SIGTERM)  # a second SIGTERM forces the workers' exit

    def _reload(self) -> None:
        """Every worker reloads (and logs its outcome); workers started later begin with this config."""
        if self.source is not None:
            try:
                config = self.source()
            except ConfigError:
                config = self.config  # the workers reject it too, and say why
            if not restart_only_changes(self.config, config):
                self.config = config
        log.info("workers_reloading", workers=len(self.workers))
        self._send_all(signal.SIGHUP)

    def _begin_stop(self) -> None:
        self._stopping = True
        grace = self.config.server.shutdown_grace_seconds
        self._deadline = time.monotonic() + grace + KILL_MARGIN_SECONDS

    def _spawn(self) -> None:
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker: never returns into the parent's code
            _worker_main(self.config, parent, self.events, self.source)
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


def _worker_main(config: Config, parent: int, events: EventLog | None, source: ConfigSource | None) -> None:
    """Body of a forked worker: its own process group and signal handlers, then serve."""
    status = 1
    try:
        os.setpgid(0, 0)
        for sig in lifecycle.SHUTDOWN_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)  # the loop installs its own; drop the parent's
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # not the default (exit) before the loop's handler
        status = lifecycle.run(run_server(config, reuse_port=True, parent_pid=parent, events=events,
                                          reload_source=source))
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
