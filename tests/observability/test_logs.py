"""The canonical request line of a real `mcp-gateway serve`, its start and stop lines, and request ids."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from backend_fixtures import REPO_ROOT, free_port
from conftest import JWT_SECRET, MCP_HEADERS, RawClient, StartGateway, make_config, make_token, stdio_backend

pytestmark = pytest.mark.timeout(90)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CANONICAL_FIELDS = {"request_id", "tenant", "subject", "method", "tool", "backend", "status", "outcome", "duration_ms"}


def _config_file(tmp_path: Path, port: int) -> Path:
    config = {
        "server": {"host": "127.0.0.1", "port": port, "shutdown_grace_seconds": 2},
        "auth": {"jwt": {"secret": JWT_SECRET}},
        "backends": [{"name": "calc", "transport": "stdio", "command": [sys.executable, "-m", "gateway.demo.calc"]}],
        "tenants": {"acme": {"backends": ["*"]}},
        "logging": {"level": "info", "format": "auto"},  # auto: JSON, since stderr is not a terminal here
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


async def _wait_ready(base: str, process: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + 30
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            assert process.returncode is None, "the gateway exited"
            try:
                async with http.get(f"{base}/readyz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError("the gateway did not become ready")


async def _one_tool_call(url: str, token: str) -> None:
    async with aiohttp.ClientSession() as http:
        client = RawClient(http, url, token)
        await client.initialize()
        status, body, headers = await client.post(
            client.request("tools/call", {"name": "calc__add", "arguments": {"a": 2, "b": 3}}),
            **{"X-Request-Id": "log-test-1", "traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"})
        assert status == 200 and body["result"]["structuredContent"] == {"result": 5.0}
        assert headers["X-Request-Id"] == "log-test-1"
        async with http.post(f"{url}?token={token}", headers=MCP_HEADERS, data=b"{}") as response:
            assert response.status == 400  # a token in the query string: must not reach the log either


async def _serve_one_request(tmp_path: Path, token: str) -> str:
    """Start `mcp-gateway serve`, send one tool call, stop it with SIGTERM; its stdout."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "serve", "--config", str(_config_file(tmp_path, port)),
        cwd=REPO_ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        await _wait_ready(f"http://127.0.0.1:{port}", process)
        await _one_tool_call(f"http://127.0.0.1:{port}/mcp", token)
        process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return output.decode()


async def test_one_request_gives_one_canonical_json_line_without_secrets(tmp_path: Path) -> None:
    token = make_token("acme", sub="log-tester")
    output = await _serve_one_request(tmp_path, token)
    lines = [json.loads(line) for line in output.splitlines() if line.strip()]  # every line is JSON

    canonical = [line for line in lines if line.get("request_id") == "log-test-1"]
    assert len(canonical) == 1
    line = canonical[0]
    assert set(line) >= CANONICAL_FIELDS
    assert line | {"duration_ms": 0, "timestamp": ""} == line | {
        "event": "request", "level": "info", "request_id": "log-test-1", "trace_id": TRACE_ID,
        "tenant": "acme", "subject": "log-tester", "method": "tools/call", "tool": "calc__add",
        "backend": "calc", "status": 200, "outcome": "ok", "duration_ms": 0, "timestamp": "",
        "http_method": "POST", "path": "/mcp"}
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] > 0

    assert token not in output and token.split(".")[2] not in output
    assert JWT_SECRET not in output
    started = next(line for line in lines if line["event"] == "gateway_started")
    assert started["backends"] == 1
    stopped = next(line for line in lines if line["event"] == "gateway_shutdown")
    assert stopped["requests"] == 4  # initialize, initialized, the call, the refused query-token post
    assert stopped["errors"] == 1 and stopped["uptime_seconds"] > 0
    assert any(line["event"] == "backend_state_changed" and line["backend"] == "calc" for line in lines)


async def test_streamed_replies_carry_the_request_id_too(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(make_config([stdio_backend("calc")]))
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    message = client.request("tools/call", {"name": "calc__slow", "arguments": {"seconds": 0.1, "steps": 1},
                                            "_meta": {"progressToken": "p1"}})
    status, _, headers = await client.post(message, **{"X-Request-Id": "stream-1"})
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert headers["X-Request-Id"] == "stream-1"


async def test_an_unsafe_request_id_is_replaced(gateway: StartGateway) -> None:
    running = await gateway(make_config([stdio_backend("calc")]))
    async with aiohttp.ClientSession() as http, http.get(running.base + "healthz",
                                                         headers={"X-Request-Id": "bad id\u00e9"}) as response:
        assert response.headers["X-Request-Id"] != "bad id\u00e9"
        assert len(response.headers["X-Request-Id"]) == 32


def test_a_stdlib_traceback_becomes_one_line_without_the_trace() -> None:
    import io
    import logging

    from gateway.config import LoggingConfig
    from gateway.logs import configure_logging

    buffer = io.StringIO()
    configure_logging(LoggingConfig(level="info", format="json"), stream=buffer)
    try:
        raise ValueError("secret detail from a malformed request")
    except ValueError:
        logging.getLogger("aiohttp.server").exception("Error handling request from 127.0.0.1")
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert (record["logger"], record["error"], record["level"]) == ("aiohttp.server", "ValueError", "info")
    assert "Traceback" not in buffer.getvalue() and "secret detail" not in buffer.getvalue()


def test_ready_event_dicts_take_the_configured_level_format_and_capture() -> None:
    import io
    import logging

    import structlog

    from gateway.config import LoggingConfig
    from gateway.logs import configure_logging

    text = io.StringIO()
    events = configure_logging(LoggingConfig(level="debug", format="console"), stream=text)
    events.write(logging.DEBUG, {"event": "request", "path": "/healthz"})
    assert "request" in text.getvalue() and "/healthz" in text.getvalue()

    class Binary:  # like sys.stdout: lines go to .buffer as bytes
        buffer = io.BytesIO()

    out = Binary()
    events = configure_logging(LoggingConfig(level="info", format="json"), stream=out)
    events.write(logging.DEBUG, {"event": "request", "path": "/healthz"})  # below the level: dropped
    events.write(logging.INFO, {"event": "request", "path": "/mcp", "status": 200})
    lines = [json.loads(line) for line in out.buffer.getvalue().splitlines()]
    assert [(line["event"], line["level"], line["path"], line["status"]) for line in lines] == [
        ("request", "info", "/mcp", 200)]
    assert lines[0]["timestamp"].endswith("Z")
    with structlog.testing.capture_logs() as captured:
        events.write(logging.INFO, {"event": "request", "path": "/mcp"})
    assert captured == [{"event": "request", "path": "/mcp", "log_level": "info"}]
    assert len(out.buffer.getvalue().splitlines()) == 1  # captured, not written


def test_an_unconfigured_event_log_goes_through_structlogs_bound_logger() -> None:
    import logging

    import structlog

    from gateway.logs import EventLog

    with structlog.testing.capture_logs() as captured:
        EventLog().write(logging.INFO, {"event": "request", "path": "/mcp", "status": 200})
    assert captured == [{"event": "request", "path": "/mcp", "status": 200, "log_level": "info"}]
