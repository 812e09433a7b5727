"""Liveness and readiness probes, with pluggable readiness checks.

Other parts register what readiness depends on (the shared store being reachable, say)
with `add_readiness_check(app, "store", check)`; a check returns None when fine, or a
short reason. Checks run concurrently, each bounded, so a hung dependency makes the
gateway not ready instead of hanging the probe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web

from gateway import keys

DRAINING = web.AppKey("draining", bool)

CHECK_TIMEOUT_SECONDS = 2.0
"""Below the usual probe timeout (Kubernetes: 1 s default, ours 3 s), so the body still says why."""

ReadinessCheck = Callable[[], Awaitable[str | None]]
"""Returns None when ready, else a short reason (no secrets: the body is public)."""


def add_readiness_check(app: web.Application, name: str, check: ReadinessCheck) -> None:
    app[keys.READINESS_CHECKS].append((name, check))


async def readiness_reasons(app: web.Application) -> list[str]:
    """Why the gateway is not ready; empty when it is."""
    reasons = []
    catalogue = app.get(keys.CATALOGUE)
    if catalogue is None or not catalogue.ready.is_set():
        reasons.append("catalogue not built yet")
    if app.get(DRAINING, False):
        reasons.append("draining")
    checks = app.get(keys.READINESS_CHECKS, [])
    results = await asyncio.gather(*(_run(name, check) for name, check in checks))
    return reasons + [reason for reason in results if reason]


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


async def readyz(request: web.Request) -> web.Response:
    """Ready once the first catalogue build is done, every check passes, and until draining starts."""
    reasons = await readiness_reasons(request.app)
    metrics = request.app.get(keys.METRICS)
    if metrics is not None:
        metrics.ready_observed(not reasons)
    body = {"status": "not ready" if reasons else "ready", "reasons": reasons}
    return web.json_response(body, status=503 if reasons else 200)


def setup_health_routes(app: web.Application) -> None:
    app[keys.READINESS_CHECKS] = []
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
