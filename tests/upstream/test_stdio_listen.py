"""The stdio upstream's listen requests to a 2026 child (the official SDK's MCPServer over stdio)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.protocol import spec
from gateway.upstream import StdioUpstream
from upstream.stdio_fixtures import MakeStdio

E2E = Path(__file__).parent.parent / "e2e"
LISTENED = [sys.executable, str(E2E / "listened_stdio_backend.py")]
SILENT = [sys.executable, str(E2E / "era_backend.py"), "--transport", "stdio", "--silent"]
WAIT = 10.0

async def _eventually(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def _listened(make_stdio: MakeStdio, command: list[str]) -> tuple[StdioUpstream, list[str]]:
    upstream = await make_stdio(command, protocol="2026")
    heard: list[str] = []

    async def changed(method: str) -> None:
        heard.append(method)

    upstream.on_list_changed(changed)
    return upstream, heard


async def test_a_2026_child_is_heard_and_listened_to_again_after_a_restart(make_stdio: MakeStdio) -> None:
    upstream, heard = await _listened(make_stdio, LISTENED)
    await _eventually(lambda: upstream.announces)
    assert upstream.pid is not None
    os.kill(upstream.pid, signal.SIGUSR1)
    await _eventually(lambda: heard == [spec.TOOLS_LIST_CHANGED])
    old, heard[:] = upstream.pid, []
    os.kill(old, signal.SIGKILL)
    await _eventually(lambda: upstream.pid not in (None, old) and upstream.announces)
    # No replay: every kind the new stream honours is re-listed, once.
    await _eventually(lambda: sorted(heard) == sorted(spec.LIST_CHANGED_ORDER))
    heard[:] = []
    os.kill(upstream.pid, signal.SIGUSR1)
    await _eventually(lambda: heard == [spec.TOOLS_LIST_CHANGED])


async def test_calls_go_on_while_the_listen_request_is_pending(make_stdio: MakeStdio) -> None:
    upstream, _ = await _listened(make_stdio, LISTENED)
    await _eventually(lambda: upstream.announces)
    calls = [upstream.request("tools/call", {"name": "echo", "arguments": {"text": str(n)}}, timeout=WAIT)
             for n in range(5)]
    replies = await asyncio.gather(*calls)
    assert [reply["result"]["content"][0]["text"] for reply in replies] == [str(n) for n in range(5)]
    assert upstream.announces  # still listening


@pytest.mark.parametrize("protocol", ["2026", "handshake"])
async def test_a_child_that_promises_nothing_or_speaks_the_handshake_is_not_listened_to(
        make_stdio: MakeStdio, protocol: str) -> None:
    command = SILENT if protocol == "2026" else [sys.executable, str(E2E / "era_backend.py"), "--transport", "stdio"]
    upstream = await make_stdio(command, protocol=protocol)
    await asyncio.sleep(0.3)
    assert upstream.announces == (protocol == "handshake")  # a handshake child tells of itself
    reply = await upstream.request("tools/list", None, timeout=WAIT)
    assert "tools" in reply["result"]


async def test_a_child_that_refuses_to_listen_is_not_asked_again_until_it_restarts(make_stdio: MakeStdio) -> None:
    refusing = [sys.executable, str(Path(__file__).with_name("refusing_stdio_server.py"))]
    upstream = await make_stdio(refusing, protocol="2026")

    async def refused() -> str:
        reply = await upstream.request("tools/call", {"name": "listens", "arguments": {}}, timeout=WAIT)
        return str(reply["result"]["content"][0]["text"])

    deadline = time.monotonic() + WAIT
    while await refused() != "1":
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)  # past the first reconnect delay (0.5 s): a broken stream would be asked again
    assert await refused() == "1" and not upstream.announces  # it is re-listed after requests instead
    old = upstream.pid
    assert old is not None
    os.kill(old, signal.SIGKILL)
    await _eventually(lambda: upstream.pid not in (None, old))
    deadline = time.monotonic() + WAIT
    while await refused() != "1":  # the new child is asked once (its own count)
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
