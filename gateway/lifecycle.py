"""Process lifecycle shared by `serve` and `stdio`: the event loop and shutdown signals."""

from __future__ import annotations

import asyncio
import atexit
import gc
import os
import shutil
import signal
import tempfile
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import structlog

log = structlog.get_logger("gateway.lifecycle")

SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus-client's multiprocess switch: worker processes write their metrics to files there."""


def share_metrics_between_processes() -> None:
    """Give `--workers N` one metrics directory, removed at exit, unless the operator chose one.

    prometheus-client reads the variable when it is first imported, so this must run
    before anything imports it; forked workers then inherit both.
    """
    if os.environ.get(MULTIPROC_ENV):
        return
    path = tempfile.mkdtemp(prefix="mcpgw-metrics-")
    os.environ[MULTIPROC_ENV] = path
    atexit.register(shutil.rmtree, path, ignore_errors=True)  # workers leave with os._exit: parent only


def run(main: Coroutine[Any, Any, int]) -> int:
    """Run `main` to completion on uvloop when it is installed (faster I/O), else on asyncio's loop."""
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(main)


GC_YOUNG_THRESHOLD = 20_000
"""Allocations between young collections (CPython's default is 700). A request allocates a
few hundred short-lived objects that reference counting frees anyway; at the default the
collector ran every couple of requests, a visible share of the CPU under load (bench/FIGURES.md)."""


def settle_garbage_collector() -> None:
    """Once started: move everything built so far out of the collector's sight, collect less often.

    The config, catalogue and application live as long as the process; scanning them in
    every full collection is wasted work (`gc.freeze`).
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - platforms without uvloop
        return None
    return uvloop.new_event_loop


class ShutdownSignals:
    """The first SIGTERM/SIGINT (or `request()`) asks for a graceful stop; the next one forces it."""

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self.forced = asyncio.Event()
        self.reason: str | None = None
        self._listeners: list[Callable[[], None]] = []

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in SHUTDOWN_SIGNALS:
            loop.add_signal_handler(sig, self.request, sig.name)

    def remove(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in SHUTDOWN_SIGNALS:
            loop.remove_signal_handler(sig)

    def on_request(self, listener: Callable[[], None]) -> None:
        """Call `listener()` on every request, graceful or forced (e.g. to wake a reader)."""
        self._listeners.append(listener)

    def request(self, reason: str) -> None:
        if self.requested.is_set():
            log.warning("shutdown_forced", reason=reason)
            self.forced.set()
        else:
            log.info("shutdown_requested", reason=reason)
            self.reason = reason
            self.requested.set()
        for listener in self._listeners:
            listener()


async def wait_unless(awaitable: Awaitable[Any], *, cancel_on: asyncio.Event,
                      timeout: float | None) -> bool:  # noqa: ASYNC109 - the caller's budget
    """Wait for `awaitable` for at most `timeout` seconds, or until `cancel_on` is set.

    True when it finished in time (even with an error); otherwise it is cancelled.
    """
    task = asyncio.ensure_future(awaitable)
    stop = asyncio.ensure_future(cancel_on.wait())
    try:
        await asyncio.wait({task, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        finished = task.done()
        if not finished:
            task.cancel()
        await asyncio.gather(task, stop, return_exceptions=True)
    return finished


async def finish_cleanup(cleanup: Awaitable[Any], *, forced: asyncio.Event, after_force: float,
                         on_force: Callable[[], Any] | None = None) -> bool:
    """Run `cleanup` to its end, unless a forced shutdown comes and it then lasts `after_force` more seconds.

    `on_force` runs as soon as the force comes (e.g. to kill children). True when cleanup completed.
    """
    task = asyncio.ensure_future(cleanup)
    if not await wait_unless(asyncio.shield(task), cancel_on=forced, timeout=None):
        if on_force is not None:
            on_force()
        await wait_unless(task, cancel_on=asyncio.Event(), timeout=after_force)
    if task.cancelled():
        return False
    if task.exception() is not None:
        log.error("cleanup_failed", error=repr(task.exception()))
        return False
    return True
