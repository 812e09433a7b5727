"""No token, secret, API key or query string ever reaches the logs.

In-process: structlog writes into a buffer for this module (debug level, JSON), and each test
checks the lines its own requests produced. Out of process: the real `mcp-gateway serve`,
whose stdout and stderr are read whole after a run of good and bad requests.
"""

from __future__ import annotations

import asyncio
import io
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import jwt
import orjson
import pytest
import structlog
from backend_fixtures import REPO_ROOT, free_port
from conftest import (
    API_KEY,
    JWT_SECRET,
    MCP_HEADERS,
    RawClient,
    StartGateway,
    http_backend_config,
    make_config,
    make_token,
    stdio_backend,
)

from gateway.config import LoggingConfig
from gateway.logs import configure_logging

pytestmark = pytest.mark.timeout(90)

BACKEND_SECRET = "Bearer backend-secret-5f0c2a9e"
TENANT_SECRET = "tenant-secret-91d3b7aa"
ARGUMENT_SECRET = "argument-secret-c44e01f7"
REVOKED_KEY = "revoked-api-key-0b8e6d42"


def attack_tokens() -> list[str]:
    now = int(time.time())
    return [
        jwt.encode({"tenant": "acme", "sub": "x", "exp": now - 3600}, JWT_SECRET, algorithm="HS256"),
        jwt.encode({"tenant": "acme", "sub": "x", "exp": now + 60}, "wrong-secret-wrong-secret-wrong-secret!"),
        jwt.encode({"tenant": "acme", "sub": "x", "exp": now + 60, "nbf": now + 3600}, JWT_SECRET),
        "eyJhbGciOiJub25lIn0.eyJ0ZW5hbnQiOiJhY21lIiwic3ViIjoieCJ9.",
        REVOKED_KEY,
        "garbage-token-7a1c",
    ]


def secrets_in(tokens: list[str]) -> list[str]:
    """Every token whole and its payload and signature parts (the header part is generic)."""
    pieces = [JWT_SECRET, API_KEY, BACKEND_SECRET, TENANT_SECRET, REVOKED_KEY]
    for token in tokens:
        pieces.append(token)
        pieces += [part for part in token.split(".")[1:] if len(part) >= 8]
    return pieces


# ---------------------------------------------------------------- the capture


@dataclass
class LogCapture:
    buffer: io.StringIO

    def mark(self) -> int:
        return len(self.buffer.getvalue())

    def since(self, mark: int) -> str:
        return self.buffer.getvalue()[mark:]


def _uncache_gateway_loggers() -> None:
    """Make module-level loggers bound earlier (cache_logger_on_first_use) follow the new config."""
    for name, module in list(sys.modules.items()):
        if name == "gateway" or name.startswith("gateway."):
            for value in list(vars(module).values()):
                if isinstance(value, structlog._config.BoundLoggerLazyProxy):
                    vars(value).pop("bind", None)


@pytest.fixture(scope="module")
def capture() -> Iterator[LogCapture]:
    buffer = io.StringIO()
    configure_logging(LoggingConfig(level="debug", format="json"), stream=buffer)
    structlog.configure(cache_logger_on_first_use=False)  # so the reset below reaches every logger
    _uncache_gateway_loggers()
    yield LogCapture(buffer)
    structlog.reset_defaults()
    _uncache_gateway_loggers()


def assert_clean(text: str, tokens: list[str]) -> None:
    found = [secret for secret in secrets_in(tokens) if secret in text]
    assert found == [], f"secrets in the log: {found}"
    assert "token=" not in text and "access_token" not in text  # no query string, ever


def request_lines(text: str) -> list[dict[str, Any]]:
    lines = [orjson.loads(line) for line in text.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("event") == "request"]


# ---------------------------------------------------------------- in process


@pytest.fixture
async def gateway_url(gateway: StartGateway, capture: LogCapture) -> str:
    config = make_config(
        [stdio_backend("calc"), stdio_backend("notes"),
         http_backend_config("dead", f"http://127.0.0.1:{free_port()}/mcp", timeout_seconds=2,
                             headers={"Authorization": BACKEND_SECRET})],
        tenants={"acme": {"backends": ["*"], "backend_headers": {"dead": {"X-Api-Key": TENANT_SECRET}}},
                 "limited": {"rate_limit": {"requests_per_second": 0.1, "burst": 1}}},
    )
    return (await gateway(config)).url


async def _post(url: str, message: dict[str, Any], headers: dict[str, str] | None = None) -> int:
    async with aiohttp.ClientSession() as http, \
            http.post(url, data=orjson.dumps(message), headers={**MCP_HEADERS, **(headers or {})}) as resp:
        await resp.read()
        return resp.status


def _initialize(token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "t", "version": "1"}}
    if token is not None:
        params["token"] = token
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}


async def test_good_requests_from_every_source_log_no_token(capture: LogCapture, gateway_url: str,
                                                            raw_client: Any) -> None:
    mark = capture.mark()
    header_token, query_token, params_token = (make_token("acme", sub=s) for s in ("h", "q", "p"))
    by_header: RawClient = raw_client(gateway_url, header_token)
    await by_header.initialize()
    await by_header.call("tools/call", {"name": "calc__add", "arguments": {"a": 1, "b": 2}})
    by_query: RawClient = raw_client(f"{gateway_url}?token={query_token}")
    await by_query.initialize()
    await by_query.call("tools/list")
    assert await _post(gateway_url, _initialize(params_token)) == 200
    by_key: RawClient = raw_client(gateway_url, API_KEY)
    await by_key.initialize()

    text = capture.since(mark)
    assert_clean(text, [header_token, query_token, params_token])
    assert {line["subject"] for line in request_lines(text)} >= {"h", "q", "p", "ci-bot"}  # the capture works


async def test_refused_tokens_from_every_source_are_not_logged(capture: LogCapture, gateway_url: str) -> None:
    mark = capture.mark()
    tokens = attack_tokens()
    for token in tokens:
        assert await _post(gateway_url, _initialize(), {"Authorization": f"Bearer {token}"}) == 401
        assert await _post(f"{gateway_url}?token={token}", _initialize()) == 401
        assert await _post(gateway_url, _initialize(token)) == 401
    assert await _post(gateway_url, _initialize(), {"Authorization": "Basic " + API_KEY}) == 401

    text = capture.since(mark)
    assert_clean(text, tokens)
    statuses = [line["status"] for line in request_lines(text)]
    assert statuses.count(401) == 3 * len(tokens) + 1
    assert "auth_failed" in text


async def test_upstream_credentials_and_failures_are_not_logged(capture: LogCapture, gateway_url: str,
                                                                raw_client: Any) -> None:
    mark = capture.mark()
    token = make_token("acme")
    client: RawClient = raw_client(gateway_url, token)
    await client.initialize()
    body = await client.call("tools/call", {"name": "calc__add", "arguments": {"a": 1, "b": 2}})
    assert body["result"]["isError"] is False
    limited: RawClient = raw_client(gateway_url, make_token("limited"))
    await limited.initialize()  # the initialized notification is already over the limit
    admin_status = await _post(gateway_url.replace("/mcp", "/admin/backends"), {}, {"Authorization": f"Bearer {token}"})

    text = capture.since(mark)
    assert_clean(text, [token])
    assert {line["status"] for line in request_lines(text)} >= {200, 429}
    assert admin_status == 405  # GET-only route, and still nothing logged


async def test_a_failing_backend_with_credentials_logs_no_credentials(capture: LogCapture, gateway: StartGateway,
                                                                      raw_client: Any) -> None:
    mark = capture.mark()
    config = make_config(
        [http_backend_config("dead", f"http://127.0.0.1:{free_port()}/mcp?key={TENANT_SECRET}", timeout_seconds=2,
                             headers={"Authorization": BACKEND_SECRET})],
        tenants={"acme": {"backends": ["*"], "backend_headers": {"dead": {"X-Api-Key": TENANT_SECRET}}}},
        catalogue={"refresh_seconds": 3600},
    )
    running = await gateway(config)
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    body = await client.call("tools/call", {"name": "dead__anything", "arguments": {}})
    assert body["error"]["code"] == -32602  # never listed: unknown

    text = capture.since(mark)
    assert "catalogue_refresh_failed" in text
    assert BACKEND_SECRET not in text and TENANT_SECRET not in text


async def test_tool_arguments_are_not_logged_at_info(capture: LogCapture, gateway_url: str, raw_client: Any) -> None:
    mark = capture.mark()
    client: RawClient = raw_client(gateway_url, make_token("acme"))
    await client.initialize()
    body = await client.call("tools/call", {"name": "notes__create_note",
                                            "arguments": {"title": "t", "body": ARGUMENT_SECRET}})
    assert "result" in body
    lines = [orjson.loads(line) for line in capture.since(mark).splitlines() if line.startswith("{")]
    assert any(line.get("tool") == "notes__create_note" for line in lines)
    above_debug = [orjson.dumps(line).decode() for line in lines if line.get("level") != "debug"]
    assert above_debug and not [line for line in above_debug if ARGUMENT_SECRET in line]


# ---------------------------------------------------------------- the real server process


async def test_the_served_gateway_never_logs_tokens_or_query_strings(tmp_path: Path) -> None:
    port = free_port()
    config_file = tmp_path / "gateway.yaml"
    config_file.write_text(
        f"server: {{host: 127.0.0.1, port: {port}}}\n"
        f"auth:\n  jwt: {{secret: {JWT_SECRET}}}\n"
        f"  api_keys: [{{sha256: {__import__('hashlib').sha256(API_KEY.encode()).hexdigest()}, tenant: acme, "
        "subject: ci-bot, scopes: [mcpgw:admin]}]\n"
        "tenants:\n  acme: {}\n"
        "logging: {level: debug, format: json}\n")
    cli = Path(sys.executable).with_name("mcp-gateway")
    process = await asyncio.create_subprocess_exec(
        str(cli), "serve", "--config", str(config_file), cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    good = make_token("acme", sub="served")
    tokens = [good, *attack_tokens()]
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        await _wait_until_up(f"http://127.0.0.1:{port}/healthz")
        assert await _post(url, _initialize(), {"Authorization": f"Bearer {good}"}) == 200
        assert await _post(f"{url}?token={good}", _initialize()) == 200
        assert await _post(url, _initialize(good)) == 200
        assert await _post(url, _initialize(), {"Authorization": f"Bearer {API_KEY}"}) == 200
        for token in tokens[1:]:
            assert await _post(f"{url}?token={token}", _initialize()) == 401
            assert await _post(url, _initialize(), {"Authorization": f"Bearer {token}"}) == 401
        async with aiohttp.ClientSession() as http, http.get(
                f"http://127.0.0.1:{port}/admin/backends?token={API_KEY}") as resp:
            assert resp.status == 401  # admin tokens come in the header only (and the query is never logged)
    finally:
        process.terminate()
        output, _ = await asyncio.wait_for(process.communicate(), 30)
    text = output.decode(errors="replace")
    assert_clean(text, tokens)
    assert '"status": 401' in text.replace('"status":401', '"status": 401')  # the request lines are there
    assert "served" in text


async def _wait_until_up(url: str) -> None:
    deadline = time.monotonic() + 20
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            try:
                async with http.get(url) as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError(f"{url} did not come up")
