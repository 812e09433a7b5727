"""Fixtures for the reliability tests: a misbehaving backend on loopback, and leak counters."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reliability.misbehaving_backend import MisbehavingBackend

HERE = Path(__file__).resolve().parent
GARBAGE_STDIO = [sys.executable, str(HERE / "garbage_stdio_server.py")]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "soak: the long soak run (selected by default; deselect with -m 'not soak')")


@dataclass
class RunningMisbehaving:
    backend: MisbehavingBackend
    url: str


@pytest.fixture
async def misbehaving(aiohttp_server: Any) -> RunningMisbehaving:
    """A MisbehavingBackend served on 127.0.0.1 (its handlers are cancelled when the gateway hangs up)."""
    backend = MisbehavingBackend()
    server = await aiohttp_server(backend.app)
    return RunningMisbehaving(backend, str(server.make_url("/mcp")))


# ---------------------------------------------------------------- leak counters (Linux /proc, no psutil)


def socket_fds() -> int:
    """Open sockets of this process."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            continue  # closed while we looked
    return count


def child_pids() -> set[int]:
    """Live (non-zombie) child processes of this process."""
    me, found = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry))
    return found


def live_tasks() -> int:
    return sum(1 for task in asyncio.all_tasks() if not task.done())


def rss_bytes(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")
