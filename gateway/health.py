"""Liveness and readiness probes."""

from __future__ import annotations

from aiohttp import web

from gateway import keys

DRAINING = web.AppKey("draining", bool)


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """Ready once the first catalogue build is done, and until draining starts."""
    reasons = []
    if not request.app[keys.CATALOGUE].ready.is_set():
        reasons.append("catalogue not built yet")
    if request.app.get(DRAINING, False):
        reasons.append("draining")
    body = {"status": "not ready" if reasons else "ready", "reasons": reasons}
    return web.json_response(body, status=503 if reasons else 200)


def setup_health_routes(app: web.Application) -> None:
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
