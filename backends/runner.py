"""Shared command line for the demo backends.

Every backend runs as ``python -m gateway.demo.<name> [--transport stdio|http] [--host H]
[--port P] [--path /mcp]``. Over stdio, stdout carries protocol messages only, so all
logging goes to stderr at warning level. Over HTTP the backend serves stateful Streamable
HTTP sessions with SSE responses, so progress notifications reach the caller mid-call.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

import anyio
import uvicorn
from mcp.server import MCPServer, Server
from mcp.server.stdio import stdio_server

AnyServer = MCPServer[Any] | Server[Any]

#: Seconds uvicorn waits for open SSE streams on shutdown before closing them.
_GRACEFUL_SHUTDOWN_SECONDS = 2


def base_parser(name: str, description: str) -> argparse.ArgumentParser:
    """Return the parser with the transport options every backend accepts."""
    parser = argparse.ArgumentParser(prog=f"python -m {__package__}.{name}", description=description)
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address")
    parser.add_argument("--port", type=int, default=8000, help="HTTP port")
    parser.add_argument("--path", default="/mcp", help="HTTP endpoint path")
    return parser


def configure_logging() -> None:
    """Send warnings and errors to stderr; stdout belongs to the protocol."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, force=True)


async def serve_stdio(server: AnyServer) -> None:
    """Serve one client over this process's stdin/stdout."""
    if isinstance(server, MCPServer):
        await server.run_stdio_async()
        return
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(server: AnyServer, host: str, port: int, path: str) -> None:
    """Serve Streamable HTTP with stateful sessions and SSE responses."""
    app = server.streamable_http_app(
        streamable_http_path=path,
        json_response=False,  # SSE, so progress notifications are delivered
        stateless_http=False,  # sessions, as a real deployment would have
        host=host,  # 127.0.0.1 turns on the SDK's DNS-rebinding protection
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN_SECONDS,
    )
    await uvicorn.Server(config).serve()


def run(server: AnyServer, args: argparse.Namespace) -> None:
    """Run ``server`` on the transport selected by parsed ``args``."""
    configure_logging()
    if args.transport == "stdio":
        anyio.run(serve_stdio, server)
    else:
        anyio.run(serve_http, server, args.host, args.port, args.path)


def main(server: AnyServer, argv: Sequence[str] | None = None, description: str = "") -> None:
    """Parse the common options and run ``server`` (entry point for simple backends)."""
    parser = base_parser(server.name, description or f"MCP demo backend {server.name!r}")
    run(server, parser.parse_args(argv))
