"""Shared fixtures: a real gateway on 127.0.0.1, tokens, and clients (SDK and raw HTTP).

This folder is on sys.path (pytest puts a rootdir conftest's folder there), so test modules
can `from backend_fixtures import ...` and `from conftest import ...`.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx2
import jwt
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from backend_fixtures import http_backend, stdio_command  # noqa: F401 - re-exported fixture
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway import keys
from gateway.app import create_app
from gateway.config import Config, parse_config

JWT_SECRET = "test-secret-0123456789abcdef0123456789abcdef"
API_KEY = "test-api-key-acme"
SCRAPE_TOKEN = "test-scrape-token-0123456789"
"""/metrics on the main port needs it (metrics.token); make_config sets it unless a test sets `metrics`."""
READY_TIMEOUT = 20.0
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def make_config(backends: list[dict[str, Any]], tenants: dict[str, Any] | None = None,
                **sections: Any) -> Config:
    """A test config: HS256 JWTs with JWT_SECRET, one API key for acme, the given backends."""
    auth = {"jwt": {"secret": JWT_SECRET},
            "api_keys": [{"sha256": hashlib.sha256(API_KEY.encode()).hexdigest(),
                          "tenant": "acme", "subject": "ci-bot", "scopes": ["mcpgw:admin"]}]}
    auth.update(sections.pop("auth", {}))
    raw = {"auth": auth, "backends": backends, "tenants": tenants or {"acme": {"backends": ["*"]}},
           "metrics": {"token": SCRAPE_TOKEN}, **sections}
    return parse_config(raw, {})


def stdio_backend(name: str, *args: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "transport": "stdio", "command": stdio_command(name, *args), **extra}


def http_backend_config(name: str, url: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "transport": "http", "url": url, **extra}


def make_token(tenant: str, sub: str = "tester", scope: str = "", ttl: int = 300, **claims: Any) -> str:
    now = int(time.time())
    body = {"tenant": tenant, "sub": sub, "iat": now, "exp": now + ttl, **claims}
    if scope:
        body["scope"] = scope
    return jwt.encode(body, JWT_SECRET, algorithm="HS256")


@dataclass
class RunningGateway:
    app: web.Application
    server: TestServer

    @property
    def url(self) -> str:
        return str(self.server.make_url(self.app[keys.CONFIG].server.path))

    @property
    def base(self) -> str:
        return str(self.server.make_url("/"))


StartGateway = Callable[[Config], Awaitable[RunningGateway]]


@pytest.fixture
async def gateway(aiohttp_server: Any) -> StartGateway:
    """`await gateway(config)`: the real app on a real port, its first catalogue build done."""

    async def start(config: Config) -> RunningGateway:
        app = create_app(config)
        server = await aiohttp_server(app)
        await asyncio.wait_for(app[keys.CATALOGUE].ready.wait(), READY_TIMEOUT)
        return RunningGateway(app, server)

    return start


@asynccontextmanager
async def sdk_client(url: str, token: str | None = None, **client_args: Any) -> AsyncIterator[Client]:
    """The official SDK client over Streamable HTTP, with a bearer token if given."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode="legacy", read_timeout_seconds=30, **client_args) as client:
            yield client


class RawClient:
    """Plain HTTP to the MCP endpoint, for inputs the SDK would never send."""

    def __init__(self, session: aiohttp.ClientSession, url: str, token: str | None) -> None:
        self.session = session
        self.url = url
        self.token = token
        self.session_id: str | None = None
        self.next_id = 0

    def headers(self, **extra: str) -> dict[str, str]:
        headers = dict(MCP_HEADERS)
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        headers.update(extra)
        return headers

    async def post(self, body: Any, **headers: str) -> tuple[int, Any, Any]:
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        async with self.session.post(self.url, data=data, headers=self.headers(**headers)) as response:
            raw = await response.read()
            parsed = orjson.loads(raw) if raw and response.content_type == "application/json" else raw
            return response.status, parsed, response.headers

    async def initialize(self, version: str = "2025-11-25") -> Any:
        status, body, headers = await self.post(self.request("initialize", {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}))
        assert status == 200, body
        self.session_id = headers["Mcp-Session-Id"]
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return body

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        return message

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        status, body, _ = await self.post(self.request(method, params))
        assert status == 200, (status, body)
        return body


@pytest.fixture
async def raw_client() -> AsyncIterator[Callable[[str, str | None], RawClient]]:
    async with aiohttp.ClientSession() as session:
        yield lambda url, token=None: RawClient(session, url, token)
