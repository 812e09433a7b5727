"""The stdio upstream, against the real SDK `calc` backend and a scripted odd child."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import structlog
from backend_fixtures import stdio_command

from gateway.upstream import StdioUpstream, UpstreamError
from gateway.upstream.base import JsonObject
from upstream.stdio_fixtures import CLIENT_INFO, MakeStdio

SCRIPTED = [sys.executable, str(Path(__file__).with_name("scripted_stdio_server.py"))]


def leftover_tasks() -> list[asyncio.Task[Any]]:
    """Tasks an upstream started that are still alive (named upstream:* or stdio:*)."""
    prefixes = ("upstream:", "stdio:")
    return [t for t in asyncio.all_tasks() if not t.done() and t.get_name().startswith(prefixes)]


@pytest.fixture
async def calc(make_stdio: MakeStdio) -> StdioUpstream:
    return await make_stdio(stdio_command("calc"))


@pytest.fixture
async def scripted(make_stdio: MakeStdio) -> StdioUpstream:
    return await make_stdio(SCRIPTED)


async def call(upstream: StdioUpstream, tool: str, budget: float = 10, **arguments: Any) -> JsonObject:
    params = {"name": tool, "arguments": arguments}
    return await upstream.request("tools/call", params, timeout=budget)


def value(reply: JsonObject) -> Any:
    return reply["result"]["structuredContent"]["result"]


async def eventually(attempt: Callable[[], Awaitable[Any]], within: float = 15.0) -> Any:
    """Retry `attempt` until it returns something truthy without raising UpstreamError."""
    async with asyncio.timeout(within):
        while True:
            try:
                if result := await attempt():
                    return result
            except UpstreamError:
                pass
            await asyncio.sleep(0.1)


async def until(condition: Callable[[], bool], within: float = 10.0) -> None:
    for _ in range(int(within / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition never became true")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# --- against the real SDK backend -------------------------------------------------------


async def test_it_lists_and_calls_the_tools_of_a_real_sdk_backend(calc: StdioUpstream) -> None:
    listing = await calc.request("tools/list", None, timeout=10)
    names = {tool["name"] for tool in listing["result"]["tools"]}
    assert {"add", "multiply", "evaluate", "convert_units", "slow"} <= names
    assert value(await call(calc, "add", a=2, b=3)) == 5
    assert calc.protocol_version == "2025-11-25"


async def test_the_backends_own_errors_are_passed_through(calc: StdioUpstream) -> None:
    reply = await calc.request("no/such/method", None, timeout=10)
    assert reply["error"]["code"] == -32601


async def test_fifty_concurrent_calls_on_one_child_each_get_their_own_answer(
    calc: StdioUpstream,
) -> None:
    replies = await asyncio.gather(*(call(calc, "add", a=i, b=1000) for i in range(50)))
    assert [value(reply) for reply in replies] == [i + 1000 for i in range(50)]


async def test_progress_is_relayed_to_each_caller_with_its_own_token(calc: StdioUpstream) -> None:
    seen: dict[Any, list[JsonObject]] = {"mine": [], 42: []}

    def collector(token: Any) -> Callable[[JsonObject], Awaitable[None]]:
        async def collect(notification: JsonObject) -> None:
            seen[token].append(notification["params"])

        return collect

    async def slow(token: Any) -> JsonObject:
        params = {"name": "slow", "arguments": {"seconds": 0.3, "steps": 3}}
        params["_meta"] = {"progressToken": token}
        return await calc.request("tools/call", params, timeout=10, on_notification=collector(token))

    await asyncio.gather(slow("mine"), slow(42))
    for token, progress in seen.items():
        assert [p["progressToken"] for p in progress] == [token] * 3
        assert [p["progress"] for p in progress] == [1, 2, 3]


async def test_a_killed_child_fails_the_pending_call_and_is_restarted(calc: StdioUpstream) -> None:
    old_pid = calc.pid
    assert old_pid is not None
    pending = asyncio.create_task(call(calc, "slow", budget=30, seconds=20, steps=1))
    await asyncio.sleep(0.3)
    os.kill(old_pid, signal.SIGKILL)
    with pytest.raises(UpstreamError) as failed:
        await asyncio.wait_for(pending, 5)
    assert failed.value.reason == "unavailable"
    assert value(await eventually(lambda: call(calc, "add", a=1, b=2))) == 3
    assert calc.pid not in (None, old_pid)


async def test_requests_fail_fast_while_the_child_is_down(make_stdio: MakeStdio) -> None:
    upstream = await make_stdio(stdio_command("calc"), restart_delays=(60.0, 60.0))
    assert upstream.pid is not None
    os.kill(upstream.pid, signal.SIGKILL)
    await until(lambda: upstream.pid is None)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(UpstreamError) as failed:
        await call(upstream, "add", budget=10, a=1, b=2)
    assert failed.value.reason == "unavailable"
    assert loop.time() - started < 0.5


async def test_a_timed_out_call_leaves_the_child_usable(calc: StdioUpstream) -> None:
    with pytest.raises(UpstreamError) as failed:
        await call(calc, "slow", budget=0.3, seconds=5, steps=1)
    assert failed.value.reason == "timeout"
    assert value(await call(calc, "multiply", a=6, b=7)) == 42


# --- against the scripted child ---------------------------------------------------------


async def test_a_timeout_tells_the_child_to_cancel(scripted: StdioUpstream) -> None:
    with pytest.raises(UpstreamError) as failed:
        await call(scripted, "hang", budget=0.3)
    assert failed.value.reason == "timeout"

    async def cancelled() -> list[Any]:
        return (await call(scripted, "cancelled"))["result"]["cancelled"]

    ids = await eventually(cancelled, within=5)
    assert len(ids) == 1 and isinstance(ids[0], int)


async def test_garbage_lines_do_not_break_other_calls(scripted: StdioUpstream) -> None:
    replies = await asyncio.gather(*(call(scripted, "noise" if n % 2 else "echo", n=n) for n in range(10)))
    assert [reply["result"]["echo"]["n"] for reply in replies] == list(range(10))


async def test_a_response_to_an_unknown_id_is_dropped(scripted: StdioUpstream) -> None:
    assert (await call(scripted, "stray", n=7))["result"] == {"echo": {"n": 7}}


async def test_a_backend_request_nobody_relays_is_refused(scripted: StdioUpstream) -> None:
    reply = (await call(scripted, "ask"))["result"]["reply"]
    assert reply["id"] == "srv-1"
    assert reply["error"]["code"] == -32600  # sampling, but this call relays nothing
    unknown = (await call(scripted, "ask", method="experimental/whatever"))["result"]["reply"]
    assert unknown["error"]["code"] == -32601


async def test_list_changed_runs_the_registered_callbacks(scripted: StdioUpstream) -> None:
    fired: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def on_change(method: str) -> None:
        fired.set_result(method)

    scripted.on_list_changed(on_change)
    await call(scripted, "list_changed")
    assert await asyncio.wait_for(fired, 5) == "notifications/tools/list_changed"


async def test_large_messages_cross_the_pipe_intact(scripted: StdioUpstream) -> None:
    blob = "x" * 3_000_000
    reply = await call(scripted, "echo", blob=blob)
    assert reply["result"]["echo"]["blob"] == blob


async def test_a_child_that_exits_mid_call_is_restarted(scripted: StdioUpstream) -> None:
    with pytest.raises(UpstreamError) as failed:
        await call(scripted, "exit")
    assert failed.value.reason == "unavailable"
    assert (await eventually(lambda: call(scripted, "echo", n=1)))["result"] == {"echo": {"n": 1}}


async def test_the_child_gets_a_minimal_environment_plus_the_configured_one(
    make_stdio: MakeStdio, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_SECRET_FOR_TEST", "s3cret")
    upstream = await make_stdio(SCRIPTED, env={"BACKEND_KEY": "k"})
    env = (await call(upstream, "env"))["result"]["env"]
    assert env["BACKEND_KEY"] == "k"
    assert "PATH" in env
    assert "GATEWAY_SECRET_FOR_TEST" not in env


async def test_stderr_lines_go_to_the_log(scripted: StdioUpstream) -> None:
    with structlog.testing.capture_logs() as logs:
        await call(scripted, "stderr")
        await asyncio.sleep(0.2)
    lines = [entry for entry in logs if entry["event"] == "backend stderr"]
    assert lines == [{"event": "backend stderr", "backend": "test", "line": "hello from stderr", "log_level": "info"}]


async def test_a_command_that_cannot_start_does_not_raise(make_stdio: MakeStdio) -> None:
    upstream = await make_stdio(["/nonexistent/mcp-backend"])
    with pytest.raises(UpstreamError) as failed:
        await call(upstream, "echo")
    assert failed.value.reason == "unavailable"


async def test_a_child_that_dies_before_the_handshake_does_not_raise(
    make_stdio: MakeStdio,
) -> None:
    upstream = await make_stdio([sys.executable, "-c", "import sys; sys.exit(1)"])
    assert upstream.pid is None
    with pytest.raises(UpstreamError):
        await call(upstream, "echo")



async def test_a_child_whose_stdout_closes_during_the_handshake_is_not_waited_for(make_stdio: MakeStdio) -> None:
    """It read initialize and closed stdout, and lives on a moment: the era fallback's server/discover
    is not sent into a pipe nobody answers (it waited out the start timeout), the attempt ends at once."""
    script = "import os, sys, time; sys.stdin.readline(); os.close(1); time.sleep(1.0)"
    started = time.monotonic()
    upstream = await make_stdio([sys.executable, "-c", script], start_timeout=20.0)
    assert time.monotonic() - started < 5.0
    assert upstream.pid is None
    with pytest.raises(UpstreamError) as failed:
        await call(upstream, "echo")
    assert failed.value.reason == "unavailable"

# --- close ------------------------------------------------------------------------------


async def test_close_fails_pending_calls_and_leaves_no_child_or_task() -> None:
    upstream = StdioUpstream("test", command=stdio_command("calc"), env={}, client_info=CLIENT_INFO)
    await upstream.start()
    pid = upstream.pid
    assert pid is not None
    pending = asyncio.create_task(call(upstream, "slow", budget=30, seconds=20, steps=1))
    await asyncio.sleep(0.3)
    await asyncio.wait_for(upstream.close(), 10)
    with pytest.raises(UpstreamError) as failed:
        await pending
    assert failed.value.reason == "unavailable"
    assert not alive(pid)
    assert leftover_tasks() == []


async def test_close_kills_a_child_that_ignores_eof_and_sigterm() -> None:
    command = [*SCRIPTED, "--stubborn"]
    upstream = StdioUpstream("test", command=command, env={}, client_info=CLIENT_INFO)
    await upstream.start()
    pid = upstream.pid
    assert pid is not None
    await asyncio.wait_for(upstream.close(), 10)
    assert not alive(pid)
    assert leftover_tasks() == []


def test_python_as_the_program_means_the_gateways_own_interpreter() -> None:
    from gateway.upstream.pool import stdio_command

    assert stdio_command(["python", "-m", "gateway.demo.clock"]) == [sys.executable, "-m", "gateway.demo.clock"]
    assert stdio_command(["python3", "x.py"]) == [sys.executable, "x.py"]
    assert stdio_command(["/usr/bin/node", "server.js"]) == ["/usr/bin/node", "server.js"]
