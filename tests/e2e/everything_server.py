"""The npm reference server `server-everything` over Streamable HTTP, on a port of its own.

`loopback.cjs` binds it to 127.0.0.1. Installed (pinned) with the conformance suite's npm packages.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from backend_fixtures import HOST, free_port, stop_process

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))
from conformance_suite import ensure_installed, node, reference_server

LOOPBACK = str(Path(__file__).with_name("loopback.cjs"))
START_SECONDS = 30.0


@asynccontextmanager
async def serve_everything() -> AsyncIterator[str]:
    """server-everything's MCP endpoint URL while it runs."""
    ensure_installed()
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        str(node()), "--require", LOOPBACK, str(reference_server("server-everything")), "streamableHttp",
        env={**os.environ, "PORT": str(port)}, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        await _listening(port)
        yield f"http://{HOST}:{port}/mcp"
    finally:
        await stop_process(process)


async def _listening(port: int) -> None:
    deadline = asyncio.get_running_loop().time() + START_SECONDS
    while asyncio.get_running_loop().time() < deadline:
        try:
            _, writer = await asyncio.open_connection(HOST, port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        writer.close()
        return
    raise AssertionError(f"server-everything did not listen on {port}")
