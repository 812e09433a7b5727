"""`GET /metrics`: the exposition, on the main port or on a site of its own (`metrics.port`).

The scrape only renders: every value it shows was pushed by its owner beforehand. In
multiprocess mode it renders every worker's files, after handing over this worker's
pending updates; each worker also flushes every FLUSH_SECONDS, so a scrape shows the
other workers at most that late.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator, Callable, Iterable, Sequence

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

from gateway.metrics.batch import FLUSH_SECONDS
from gateway.metrics.registry import Metrics
from gateway.protocol.errors import Unauthorized

log = structlog.get_logger("gateway.metrics")


def render(metrics: Metrics, accept: str | None) -> tuple[bytes, str]:
    """The scrape body and its content type (OpenMetrics, with exemplars, when asked for)."""
    encoder, content_type = choose_encoder(accept or "")
    metrics.flush()  # the multiprocess registry below has no flush-first collector of this worker
    return encoder(_exposed(metrics)), content_type


def collected(metrics: Metrics) -> Iterable[Metric]:
    """Every family as a scrape would render it now (the status page's traffic window reads these)."""
    metrics.flush()
    return _exposed(metrics).collect()


def _exposed(metrics: Metrics) -> CollectorRegistry:
    if not metrics.multiprocess_dir:
        return metrics.registry
    # Every worker's files, plus this worker's scrape-time collectors.
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=metrics.multiprocess_dir)
    registry.register(metrics.age)
    return registry


def setup_metrics(app: web.Application, metrics: Metrics, *, host: str, port: int | None,
                  token: str | None = None, middlewares: Sequence[Middleware] = ()) -> None:
    """Serve /metrics only on `port` (a second site on `host`, behind `middlewares`) when set; else
    on the main port; wherever it is, to scrapes that present `token` when one is configured. With
    neither port nor token, nowhere: it names every tenant, backend and tool."""
    app.cleanup_ctx.append(_flushing(metrics))
    if port is None and token is None:
        log.warning("metrics_not_served", hint="set metrics.port, or metrics.token to scrape the main port")
    elif port is None:
        app.router.add_get("/metrics", _scrape_handler(metrics, token))
    else:
        # Workers share the port like the main one (reuse_port); any of them answers for all.
        app.cleanup_ctx.append(_metrics_site(_scrape_handler(metrics, token), middlewares, host, port,
                                             reuse_port=bool(metrics.multiprocess_dir)))


def _scrape_handler(metrics: Metrics, token: str | None = None) -> Handler:
    expected = f"Bearer {token}".encode() if token is not None else None

    async def scrape(request: web.Request) -> web.Response:
        if expected is not None and not hmac.compare_digest(request.headers.get("Authorization", "").encode(),
                                                            expected):
            raise Unauthorized("Unauthorized: /metrics needs the scrape token (metrics.token)")
        body, content_type = render(metrics, request.headers.get("Accept"))
        return web.Response(body=body, headers={"Content-Type": content_type})

    return scrape


def _flushing(metrics: Metrics) -> Callable[[web.Application], AsyncIterator[None]]:
    """In multiprocess mode, flush every FLUSH_SECONDS (a scrape may reach another worker) and at the end."""

    async def flushing(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(_flush_every(metrics, FLUSH_SECONDS)) if metrics.multiprocess_dir else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
            metrics.flush()

    return flushing


async def _flush_every(metrics: Metrics, seconds: float) -> None:
    while True:
        await asyncio.sleep(seconds)
        metrics.flush()


def _metrics_site(handler: Handler, middlewares: Sequence[Middleware], host: str, port: int,
                  reuse_port: bool) -> Callable[[web.Application], AsyncIterator[None]]:
    async def metrics_site(app: web.Application) -> AsyncIterator[None]:
        site_app = web.Application(middlewares=middlewares)
        site_app.router.add_get("/metrics", handler)
        runner = web.AppRunner(site_app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, port, reuse_port=reuse_port).start()
        try:
            yield
        finally:
            await runner.cleanup()

    return metrics_site
