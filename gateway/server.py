"""Running the HTTP gateway: event loop, listening socket, signals."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace

import structlog
from aiohttp import web

from gateway.app import create_app
from gateway.config import Config
from gateway.logs import configure_logging

log = structlog.get_logger("gateway")


def _event_loop_policy() -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - platforms without uvloop
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def serve(config: Config, *, host: str | None = None, port: int | None = None, workers: int = 1) -> int:
    configure_logging(config.logging)
    if workers != 1:
        print("error: --workers > 1 is not supported yet", file=sys.stderr)
        return 2
    _event_loop_policy()
    server = replace(config.server, host=host or config.server.host, port=port or config.server.port)
    config = replace(config, server=server)
    host, port = server.host, server.port
    log.info("gateway_starting", host=host, port=port, backends=len(config.backends))
    web.run_app(create_app(config), host=host, port=port, print=None,
                shutdown_timeout=config.server.shutdown_grace_seconds, access_log=None)
    log.info("gateway_stopped")
    return 0
