"""What an HTTP backend receives: the tenant's own credential, never the client's token.

The backend here is a small recording MCP server (just enough Streamable HTTP: initialize,
notifications, tools/list, tools/call) that keeps every request's raw headers and body.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from aiohttp import web
from conftest import RawClient, StartGateway, http_backend_config, make_config, make_token

from gateway.config import HttpBackend, TenantConfig
from gateway.tenancy import Principal, upstream_headers

pytestmark = pytest.mark.timeout(60)

ECHO_TOOL = {"name": "echo", "description": "Records its call", "inputSchema": {"type": "object"}}
BACKEND_DEFAULT = "Bearer backend-default-cred"
ALPHA_CRED = "Bearer alpha-own-cred"
BETA_KEY = "beta-own-key"


@dataclass
class Recorded:
    """One HTTP request as the backend saw it."""

    http_method: str
    headers: list[tuple[str, str]]
    body: bytes
    message: dict[str, Any] = field(default_factory=dict)

    def values(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]

    @property
    def method(self) -> str | None:
        return self.message.get("method")

    @property
    def session_id(self) -> str | None:
        found = self.values("Mcp-Session-Id")
        return found[0] if found else None


class Recorder:
    """A recording MCP backend: one JSON reply per request, every request kept."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.issued: dict[str, Recorded] = {}  # session id -> the initialize request that got it
        self._ids = itertools.count(1)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/mcp", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.raw_headers]
        record = Recorded(request.method, headers, await request.read())
        self.requests.append(record)
        if request.method != "POST":
            return web.Response(status=405)  # no GET stream, nothing to DELETE
        record.message = orjson.loads(record.body)
        if "id" not in record.message:
            return web.Response(status=202)
        return self._reply(record)

    def _reply(self, record: Recorded) -> web.Response:
        headers = {}
        if record.method == "initialize":
            result: Any = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                           "serverInfo": {"name": "recorder", "version": "1"}}
            session_id = headers["Mcp-Session-Id"] = f"backend-session-{next(self._ids)}"
            self.issued[session_id] = record
        elif record.method == "tools/list":
            result = {"tools": [ECHO_TOOL]}
        elif record.method == "tools/call":
            result = {"content": [{"type": "text", "text": "recorded"}], "isError": False}
        else:
            body = {"jsonrpc": "2.0", "id": record.message["id"], "error": {"code": -32601, "message": "nope"}}
            return web.json_response(body)
        return web.json_response({"jsonrpc": "2.0", "id": record.message["id"], "result": result}, headers=headers)

    def calls(self, caller: str) -> list[Recorded]:
        """The tools/call requests whose arguments name `caller`."""
        return [r for r in self.requests
                if r.method == "tools/call" and r.message["params"]["arguments"].get("caller") == caller]

    def catalogue_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.method == "tools/list"]


class ParamsTokenClient(RawClient):
    """Sends its token as JSON-RPC `params.token` in every message, and no header."""

    def __init__(self, base: RawClient, token: str) -> None:
        super().__init__(base.session, base.url, None)
        self.params_token = token

    async def post(self, body: Any, **headers: str) -> tuple[int, Any, Any]:
        if isinstance(body, dict):
            body = {**body, "params": {**body.get("params", {}), "token": self.params_token}}
        return await super().post(body, **headers)


@dataclass
class World:
    plain: Recorder
    ident: Recorder
    url: str
    raw_client: Any

    async def client(self, token: str, source: str = "header") -> RawClient:
        """An initialized client of the gateway sending `token` from `source`."""
        if source == "header":
            client = self.raw_client(self.url, token)
        elif source == "query":
            client = self.raw_client(f"{self.url}?token={token}", None)
        else:
            client = ParamsTokenClient(self.raw_client(self.url, None), token)
        await client.initialize()
        return client


@pytest.fixture
async def world(aiohttp_server: Any, gateway: StartGateway, raw_client: Any) -> World:
    plain, ident = Recorder(), Recorder()
    plain_server = await aiohttp_server(plain.app())
    ident_server = await aiohttp_server(ident.app())
    config = make_config(
        [
            http_backend_config("plain", str(plain_server.make_url("/mcp")),
                                headers={"Authorization": BACKEND_DEFAULT, "X-Backend-Key": "shared-key"}),
            http_backend_config("ident", str(ident_server.make_url("/mcp")), identity_headers=True,
                                headers={"x-mcp-tenant": "configured"}),  # replaced by the principal's, any case
        ],
        tenants={
            "alpha": {"backends": ["*"],
                      "backend_headers": {"plain": {"authorization": ALPHA_CRED}}},  # other case on purpose
            "beta": {"backends": ["*"], "backend_headers": {"plain": {"X-Backend-Key": BETA_KEY}}},
            "acme": {"backends": ["*"]},  # the conftest API key's tenant
        },
    )
    running = await gateway(config)
    return World(plain, ident, running.url, raw_client)


async def _call(client: RawClient, tool: str, caller: str) -> None:
    body = await client.call("tools/call", {"name": tool, "arguments": {"caller": caller}})
    assert body["result"]["content"][0]["text"] == "recorded", body


def _everything_seen(recorder: Recorder) -> str:
    return "\n".join(f"{r.headers!r} {r.body.decode('latin-1')}" for r in recorder.requests)


@pytest.mark.parametrize("source", ["header", "query", "params"])
async def test_a_backend_never_sees_the_clients_token(world: World, source: str) -> None:
    token = make_token("alpha", sub="alice")
    client = await world.client(token, source)
    await _call(client, "plain__echo", source)
    await _call(client, "ident__echo", source)

    for recorder in (world.plain, world.ident):
        assert len(recorder.calls(source)) == 1
        assert token not in _everything_seen(recorder)
        assert token.split(".")[2] not in _everything_seen(recorder)  # not even the signature
        assert all("token" not in r.message.get("params", {}) for r in recorder.requests)


async def test_each_tenant_sends_its_own_credential_over_the_backend_default(world: World) -> None:
    alpha = await world.client(make_token("alpha"))
    beta = await world.client(make_token("beta"))
    await _call(alpha, "plain__echo", "alpha")
    await _call(beta, "plain__echo", "beta")

    [alpha_call] = world.plain.calls("alpha")
    assert alpha_call.values("Authorization") == [ALPHA_CRED]  # exactly one, the tenant's
    assert alpha_call.values("X-Backend-Key") == ["shared-key"]
    [beta_call] = world.plain.calls("beta")
    assert beta_call.values("Authorization") == [BACKEND_DEFAULT]
    assert beta_call.values("X-Backend-Key") == [BETA_KEY]
    for listing in world.plain.catalogue_requests():  # the gateway's own work uses the backend's
        assert listing.values("Authorization") == [BACKEND_DEFAULT]
        assert listing.values("X-Backend-Key") == ["shared-key"]


async def test_identity_headers_go_only_to_a_backend_that_asks_for_them(world: World) -> None:
    alpha = await world.client(make_token("alpha", sub="alice"))
    beta = await world.client(make_token("beta", sub="bob"))
    status, _, _ = await alpha.post(alpha.request("tools/call", {"name": "ident__echo", "arguments": {"caller": "a"}}),
                                    **{"X-MCP-Tenant": "beta", "X-MCP-Subject": "mallory"})  # spoofing attempt
    assert status == 200
    await _call(beta, "ident__echo", "b")
    await _call(alpha, "plain__echo", "a")

    [as_alpha] = world.ident.calls("a")
    assert (as_alpha.values("X-MCP-Tenant"), as_alpha.values("X-MCP-Subject")) == (["alpha"], ["alice"])
    [as_beta] = world.ident.calls("b")
    assert (as_beta.values("X-MCP-Tenant"), as_beta.values("X-MCP-Subject")) == (["beta"], ["bob"])
    for request in world.plain.requests:
        assert not request.values("X-MCP-Tenant") and not request.values("X-MCP-Subject")


async def test_upstream_sessions_are_per_tenant(world: World) -> None:
    alpha = await world.client(make_token("alpha", sub="alice"))
    alpha_again = await world.client(make_token("alpha", sub="carol"))  # same tenant, other subject
    beta = await world.client(make_token("beta"))
    for client, caller in ((alpha, "alpha"), (beta, "beta"), (alpha_again, "alpha"), (beta, "beta")):
        await _call(client, "plain__echo", caller)

    alpha_sessions = {r.session_id for r in world.plain.calls("alpha")}
    beta_sessions = {r.session_id for r in world.plain.calls("beta")}
    catalogue_sessions = {r.session_id for r in world.plain.catalogue_requests()}
    assert len(alpha_sessions) == len(beta_sessions) == 1
    assert alpha_sessions.isdisjoint(beta_sessions)
    assert catalogue_sessions.isdisjoint(alpha_sessions | beta_sessions)
    # each backend session was opened with its own tenant's credential
    [alpha_session], [beta_session] = alpha_sessions, beta_sessions
    assert world.plain.issued[alpha_session].values("Authorization") == [ALPHA_CRED]
    assert world.plain.issued[beta_session].values("X-Backend-Key") == [BETA_KEY]
    # the client's gateway session id is never passed on
    assert {r.session_id for r in world.plain.requests} <= set(world.plain.issued) | {None}


def test_header_overrides_ignore_the_case_of_header_names() -> None:
    """A tenant's `authorization` replaces the backend's `Authorization`, never joins it."""
    backend = HttpBackend(name="b", namespace="b", url="http://x/mcp", identity_headers=True,
                          headers={"Authorization": "backend", "x-mcp-tenant": "configured"})
    tenant = TenantConfig("alpha", backend_headers={"b": {"authorization": "tenant"}})
    headers = upstream_headers(backend, tenant, Principal("alpha", "alice"))
    assert sorted((k.lower(), v) for k, v in headers.items()) == [
        ("authorization", "tenant"), ("x-mcp-subject", "alice"), ("x-mcp-tenant", "alpha")]


def test_a_subject_with_line_breaks_cannot_write_headers_of_its_own() -> None:
    """A token's `sub` is the caller's to choose: its control characters reach backends percent-encoded."""
    backend = HttpBackend(name="b", namespace="b", url="http://x/mcp", identity_headers=True)
    headers = upstream_headers(backend, TenantConfig("alpha"), Principal("alpha", "alice\r\nAuthorization: x\0"))
    assert headers["X-MCP-Subject"] == "alice%0D%0AAuthorization: x%00"
    assert headers["X-MCP-Tenant"] == "alpha"
