"""`mcp-gateway stdio`: one local client over stdin/stdout, with the same tools as over HTTP."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import orjson
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from lifecycle.processes import API_KEY, REPO_ROOT, descendants_of, gateway_config, gateway_env, is_running

pytestmark = pytest.mark.timeout(90)

LINE_TIMEOUT = 20.0
EXIT_TIMEOUT = 15.0
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _command(config: Path) -> list[str]:
    return [sys.executable, "-m", "gateway", "stdio", "--config", str(config)]


class StdioGateway:
    """The gateway in stdio mode on raw pipes, every read bounded."""

    def __init__(self, config: Path, token: str | None = API_KEY) -> None:
        env = gateway_env(**({"MCP_GATEWAY_TOKEN": token} if token else {}))
        self.process = subprocess.Popen(_command(config), cwd=REPO_ROOT, env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self.lines: list[bytes] = []  # everything read from stdout, for the "only JSON-RPC" check
        self._buffer = b""

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(orjson.dumps(message) + b"\n")
        self.process.stdin.flush()

    def read_message(self, timeout: float = LINE_TIMEOUT) -> dict[str, Any]:
        line = self._read_line(timeout)
        self.lines.append(line)
        return orjson.loads(line)

    def reply_to(self, request_id: int) -> dict[str, Any]:
        """Read until the response to `request_id`, keeping what came before it."""
        while (message := self.read_message()).get("id") != request_id or "method" in message:
            pass
        return message

    def _read_line(self, timeout: float) -> bytes:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                pytest.fail(f"no line from the gateway (EOF or {timeout:g}s)\n{self.stderr()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def handshake(self) -> dict[str, Any]:
        self.send(INITIALIZE)
        reply = self.reply_to(1)
        self.send(INITIALIZED)
        return reply

    def close_stdin(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()

    def wait(self, timeout: float = EXIT_TIMEOUT) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"stdio gateway still running {timeout:g}s later\n{self.stderr()}")

    def rest_of_stdout(self) -> list[bytes]:
        """After exit: the lines not read yet."""
        assert self.process.stdout is not None
        rest = self._buffer + self.process.stdout.read()
        return [line for line in rest.split(b"\n") if line]

    def stderr(self) -> str:
        if self.process.poll() is None:
            return "(still running)"
        assert self.process.stderr is not None
        return self.process.stderr.read().decode(errors="replace")

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None and not stream.closed:
                stream.close()


@pytest.fixture
def stdio_gateway(tmp_path: Path) -> Iterator[Any]:
    started: list[StdioGateway] = []

    def start(token: str | None = API_KEY, **config: Any) -> StdioGateway:
        gateway = StdioGateway(gateway_config(tmp_path, port=0, **config), token)
        started.append(gateway)
        return gateway

    yield start
    for gateway in started:
        gateway.kill()


def _assert_json_rpc(line: bytes) -> None:
    message = orjson.loads(line)
    assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", line


ERAS = {"legacy": "2025-11-25", "auto": "2026-07-28"}
"""The SDK client's modes and the era each opens the stdio connection in (auto: its server/discover)."""


@pytest.mark.parametrize("mode", ERAS)
async def test_the_sdk_client_lists_and_calls_tools(tmp_path: Path, mode: Any) -> None:
    params = StdioServerParameters(command=sys.executable, args=_command(gateway_config(tmp_path, port=0))[1:],
                                   env={"MCP_GATEWAY_TOKEN": API_KEY, "PATH": os.environ.get("PATH", "")},
                                   cwd=str(REPO_ROOT))
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with Client(params, mode=mode, read_timeout_seconds=30) as client:
        assert client.protocol_version == ERAS[mode]
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"calc__add", "calc__slow"} <= names
        added = await client.call_tool("calc__add", {"a": 2, "b": 3})
        assert added.is_error is False and added.structured_content == {"result": 5.0}
        slow = await client.call_tool("calc__slow", {"seconds": 0.3, "steps": 3}, progress_callback=on_progress)
        assert slow.is_error is False
    assert progress == [1, 2, 3]


@pytest.mark.parametrize("mode", ERAS)
async def test_the_sdk_client_gets_prompts_and_reads_resources_over_stdio(tmp_path: Path, mode: Any) -> None:
    params = StdioServerParameters(command=sys.executable, args=_command(gateway_config(tmp_path, port=0))[1:],
                                   env={"MCP_GATEWAY_TOKEN": API_KEY, "PATH": os.environ.get("PATH", "")},
                                   cwd=str(REPO_ROOT))
    async with Client(params, mode=mode, read_timeout_seconds=30) as client:
        assert client.protocol_version == ERAS[mode]
        assert client.server_capabilities.prompts is not None and client.server_capabilities.resources is not None
        assert [p.name for p in (await client.list_prompts()).prompts] == ["calc__explain"]
        prompt = await client.get_prompt("calc__explain", {"expression": "1 + 1"})
        assert "1 + 1" in prompt.messages[0].content.text  # type: ignore[union-attr]
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["calc+calc://squares/{count}"]
        read = await client.read_resource("calc+calc://squares/3")
    assert read.contents[0].uri == "calc+calc://squares/3" and read.contents[0].blob == "AAEE"  # type: ignore[union-attr]


async def test_the_sdk_client_subscribes_and_hears_the_update_on_stdout(tmp_path: Path) -> None:
    watched = {"name": "w", "transport": "stdio",
               "command": [sys.executable, str(REPO_ROOT / "tests" / "e2e" / "watched_backend.py")]}
    params = StdioServerParameters(command=sys.executable,
                                   args=_command(gateway_config(tmp_path, port=0, backends=[watched]))[1:],
                                   env={"MCP_GATEWAY_TOKEN": API_KEY, "PATH": os.environ.get("PATH", "")},
                                   cwd=str(REPO_ROOT))
    heard: list[str] = []
    arrived = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(str(message.params.uri))
            arrived.set()

    async with Client(params, mode="legacy", read_timeout_seconds=30, message_handler=on_message) as client:
        assert client.server_capabilities.resources is not None and client.server_capabilities.resources.subscribe
        await client.subscribe_resource("w+memo://a")
        await client.call_tool("w__touch", {"uri": "memo://a", "text": "new"})
        with anyio.fail_after(LINE_TIMEOUT):
            await arrived.wait()
    assert heard == ["w+memo://a"]


def test_eof_ends_the_process_cleanly_and_stdout_holds_only_json_rpc(stdio_gateway: Any) -> None:
    gateway = stdio_gateway()
    assert gateway.handshake()["result"]["capabilities"]["tools"]["listChanged"] is True
    children = descendants_of(gateway.process.pid)
    gateway.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert any(t["name"] == "calc__add" for t in gateway.reply_to(2)["result"]["tools"])
    gateway.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                  "params": {"name": "calc__slow", "arguments": {"seconds": 1, "steps": 2},
                             "_meta": {"progressToken": "p"}}})
    gateway.close_stdin()  # EOF while the call is in flight: it still completes

    assert gateway.wait() == 0
    lines = gateway.lines + gateway.rest_of_stdout()
    for line in lines:
        _assert_json_rpc(line)
    replies = {m["id"]: m for m in map(orjson.loads, lines) if "id" in m}
    assert replies[3]["result"]["content"][0]["text"] == "slept 1s in 2 steps"
    assert sum(b"notifications/progress" in line for line in lines) == 2
    assert children and not any(is_running(pid) for pid in children)
    assert b'"stdio_stopped"' in gateway.process.stderr.read()  # logs go to stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_process_cleanly(stdio_gateway: Any, sig: signal.Signals) -> None:
    gateway = stdio_gateway()
    gateway.handshake()
    children = descendants_of(gateway.process.pid)
    gateway.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "calc__slow", "arguments": {"seconds": 20, "steps": 20}}})
    time.sleep(0.3)
    started = time.monotonic()
    os.kill(gateway.process.pid, sig)
    assert gateway.wait() == 0
    assert time.monotonic() - started < 8  # the call in flight is cancelled, not waited for
    assert children and not any(is_running(pid) for pid in children)


def test_a_broken_pipe_ends_the_process_cleanly(stdio_gateway: Any) -> None:
    gateway = stdio_gateway()
    gateway.handshake()
    gateway.process.stdout.close()  # the client is gone but its stdin end lingers
    gateway.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert gateway.wait() == 0


def test_a_cancelled_request_gets_no_reply_and_others_still_do(stdio_gateway: Any) -> None:
    gateway = stdio_gateway()
    gateway.handshake()
    gateway.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "calc__slow", "arguments": {"seconds": 20, "steps": 20}}})
    gateway.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
    gateway.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert gateway.reply_to(3)["result"] == {}
    started = time.monotonic()
    gateway.close_stdin()
    assert gateway.wait() == 0
    assert time.monotonic() - started < 8  # nothing left in flight to wait for
    assert all(orjson.loads(line).get("id") != 2 for line in gateway.lines + gateway.rest_of_stdout())


MODERN = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def test_a_2026_connection_is_opened_by_its_first_request_and_keeps_its_era(stdio_gateway: Any) -> None:
    gateway = stdio_gateway()
    gateway.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                  "params": {"name": "calc__add", "arguments": {"a": 1, "b": 2}, "_meta": ENVELOPE}})
    result = gateway.reply_to(1)["result"]
    assert result["resultType"] == "complete" and result["structuredContent"] == {"result": 3.0}
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-gateway"
    gateway.send(INITIALIZE)  # the handshake has no place on a 2026 connection (the SDK's stdio rule)
    error = gateway.reply_to(1)["error"]
    assert error["code"] == -32022 and MODERN in error["data"]["supported"], error
    gateway.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})  # no envelope: the ladder
    assert gateway.reply_to(2)["error"]["code"] == -32602
    gateway.send({"jsonrpc": "2.0", "id": 3, "result": {}})  # a 2026 client is asked nothing to answer
    assert gateway.read_message() == {"jsonrpc": "2.0", "id": 3, "error": {
        "code": -32600, "message": "Invalid Request: a 2026-07-28 client sends requests, not responses (it is asked "
                                   "nothing)"}}


def test_a_handshake_connection_refuses_a_2026_request(stdio_gateway: Any) -> None:
    gateway = stdio_gateway()
    gateway.handshake()
    gateway.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": ENVELOPE}})
    assert gateway.reply_to(2)["error"]["code"] == -32600
    gateway.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    assert gateway.reply_to(3)["result"]["tools"]


def test_a_2026_request_hears_its_progress_and_is_cancelled_by_notification(stdio_gateway: Any) -> None:
    gateway = stdio_gateway()
    slow = {"name": "calc__slow", "arguments": {"seconds": 20, "steps": 20},
            "_meta": {**ENVELOPE, "progressToken": "p"}}
    gateway.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": slow})
    progress = gateway.read_message()
    assert progress["method"] == "notifications/progress" and progress["params"]["progressToken"] == "p"
    gateway.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    gateway.send({"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {"_meta": ENVELOPE}})
    assert MODERN in gateway.reply_to(2)["result"]["supportedVersions"]
    started = time.monotonic()
    gateway.close_stdin()
    assert gateway.wait() == 0
    assert time.monotonic() - started < 8  # the cancelled call was not waited for
    later = [orjson.loads(line) for line in gateway.lines[2:] + gateway.rest_of_stdout()]
    assert all(message.get("id") != 1 for message in later)  # a cancelled request gets no reply

def test_bad_lines_get_json_rpc_errors(stdio_gateway: Any) -> None:
    gateway = stdio_gateway()
    gateway.handshake()
    gateway.process.stdin.write(b"not json\n")
    gateway.send({"jsonrpc": "2.0", "id": 5})
    gateway.send({"jsonrpc": "2.0", "id": 6, "method": "nope"})
    errors = [gateway.read_message()["error"]["code"] for _ in range(3)]
    assert sorted(errors) == [-32700, -32601, -32600]


def test_anonymous_tenant_serves_without_a_token(stdio_gateway: Any) -> None:
    gateway = stdio_gateway(token=None, auth={"anonymous_tenant": "acme"})
    assert gateway.handshake()["result"]["serverInfo"]["name"] == "mcp-gateway"


@pytest.mark.parametrize(("token", "config", "message"), [
    (None, {}, "MCP_GATEWAY_TOKEN"),
    ("not-a-valid-key", {}, "not a valid token"),
    (API_KEY, {"backends": []}, "no backend is configured"),
])
def test_it_refuses_to_start_with_a_clear_message(stdio_gateway: Any, token: str | None, config: dict[str, Any],
                                                  message: str) -> None:
    gateway = stdio_gateway(token=token, **config)
    assert gateway.wait() == 2
    assert message in gateway.stderr()
    assert gateway.rest_of_stdout() == []
