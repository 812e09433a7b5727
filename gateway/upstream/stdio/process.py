"""The child process of a stdio backend: its environment, spawning, stderr, and stopping it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress

import structlog

INHERITED_ENV = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
    "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT",
)  # fmt: skip
"""The only gateway environment variables a child inherits (no secrets leak by default)."""
STOP_WAIT = 2.0
"""Seconds to wait after closing stdin, then again after SIGTERM, before SIGKILL."""

_log = structlog.get_logger("gateway.upstream")
Process = asyncio.subprocess.Process


def child_env(configured: Mapping[str, str]) -> dict[str, str]:
    env = {key: value for key in INHERITED_ENV if (value := os.environ.get(key)) is not None}
    env.update(configured)
    return env


async def spawn(command: Sequence[str], *, env: Mapping[str, str], cwd: str | None, line_limit: int) -> Process:
    """Start the child with pipes on all three streams; lines over `line_limit` bytes overrun its reader."""
    return await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        limit=line_limit,
        # Its own session: a Ctrl-C or SIGTERM sent to the gateway's process group must not
        # kill backends before the gateway has drained; close() stops them in order.
        start_new_session=True,
    )


async def forward_stderr(backend: str, stderr: asyncio.StreamReader, heard: Callable[[str], None]) -> None:
    """Log each line the child writes to stderr, and hand it to `heard`, until it closes."""
    while True:
        try:
            line = await stderr.readline()
        except ValueError:
            continue
        if not line:
            return
        text = line.decode(errors="replace").rstrip()
        heard(text)
        _log.info("backend stderr", backend=backend, line=text)


async def stop_process(process: Process) -> None:
    """Close stdin (stdio servers exit on EOF), then SIGTERM, then SIGKILL; always reap."""
    if process.stdin is not None:
        process.stdin.close()
    if await _exited(process, STOP_WAIT):
        return
    with suppress(ProcessLookupError):
        process.terminate()
    if await _exited(process, STOP_WAIT):
        return
    with suppress(ProcessLookupError):
        process.kill()
    await process.wait()


async def _exited(process: Process, seconds: float) -> bool:
    try:
        async with asyncio.timeout(seconds):
            await process.wait()
    except TimeoutError:
        return False
    return True


async def cancel_tasks(*tasks: asyncio.Task[None]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
