"""Liveness and readiness probes, with pluggable readiness checks.

`Readiness` decides whether the gateway should get traffic and why not: gates that open once
(the first catalogue build), async checks other parts register (the shared store being
reachable, say; None when fine, else a short reason), and draining. Checks run concurrently,
each bounded, so a hung dependency makes the gateway not ready instead of hanging the probe.
Every verdict goes to `on_verdict` (the `mcpgw_ready` gauge): when a probe asks, when a gate
opens, when draining starts, and every WATCH_SECONDS while the app runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from aiohttp import web

CHECK_TIMEOUT_SECONDS = 2.0
"""Below the usual probe timeout (Kubernetes: 1 s default, ours 3 s), so the body still says why."""
WATCH_SECONDS = 1.0
"""How often readiness is evaluated without a probe, so its gauge follows time-bound checks."""

ReadinessCheck = Callable[[], Awaitable[str | None]]
"""Returns None when ready, else a short reason (no secrets: the body is public)."""
Signal = Callable[[web.Application], Awaitable[None]]


class Readiness:
    """Whether the gateway should get traffic, and why not; each verdict is reported to `on_verdict`."""

    def __init__(self, *, on_verdict: Callable[[bool], None] | None = None) -> None:
        self._gates: list[tuple[str, asyncio.Event]] = []
        self._checks: list[tuple[str, ReadinessCheck]] = []
        self._on_verdict = on_verdict
        self.draining = False

    def gate(self, reason: str, opened: asyncio.Event) -> None:
        """Not ready, saying `reason`, until `opened` is set (the first catalogue build, say)."""
        self._gates.append((reason, opened))

    def add_check(self, name: str, check: ReadinessCheck) -> None:
        self._checks.append((name, check))

    def start_draining(self) -> None:
        """Not ready from now on: load balancers stop sending traffic."""
        self.draining = True
        self._report(False)

    async def reasons(self) -> list[str]:
        """Why the gateway is not ready (empty when it is); the verdict is reported on the way."""
        reasons = [reason for reason, opened in self._gates if not opened.is_set()]
        if self.draining:
            reasons.append("draining")
        results = await asyncio.gather(*(_run(name, check) for name, check in self._checks))
        reasons += [reason for reason in results if reason]
        self._report(not reasons)
        return reasons

    async def watch(self, seconds: float = WATCH_SECONDS) -> None:
        """Evaluate now, as soon as a closed gate opens, and every `seconds` after."""
        while True:
            await self.reasons()
            closed = [opened for _, opened in self._gates if not opened.is_set()]
            if not closed:
                await asyncio.sleep(seconds)
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):  # not wait_for: on 3.11 it can swallow the stop's cancel
                    await closed[0].wait()

    def _report(self, ready: bool) -> None:
        if self._on_verdict is not None:
            self._on_verdict(ready)


async def _run(name: str, check: ReadinessCheck) -> str | None:
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
            reason = await check()
    except TimeoutError:
        return f"{name}: no answer within {CHECK_TIMEOUT_SECONDS:g}s"
    except Exception as exc:  # a broken check means not ready, never a 500
        return f"{name}: check failed ({type(exc).__name__})"
    return f"{name}: {reason}" if reason else None


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def setup_health_routes(app: web.Application, readiness: Readiness) -> None:
    """/healthz and /readyz; readiness is also watched from startup to shutdown."""

    async def readyz(request: web.Request) -> web.Response:
        """Ready once every gate is open, every check passes, and until draining starts."""
        reasons = await readiness.reasons()
        body = {"status": "not ready" if reasons else "ready", "reasons": reasons}
        return web.json_response(body, status=503 if reasons else 200)

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    start, stop = _watching(readiness)
    app.on_startup.append(start)  # after every cleanup_ctx startup: the gates and checks are in
    app.on_shutdown.append(stop)


def _watching(readiness: Readiness) -> tuple[Signal, Signal]:
    tasks: list[asyncio.Task[None]] = []

    async def start(app: web.Application) -> None:
        tasks.append(asyncio.create_task(readiness.watch(), name="readiness-watch"))

    async def stop(app: web.Application) -> None:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    return start, stop
