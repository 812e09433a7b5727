"""examples/public-http.yaml does what its header says: each tenant signs in with its own gateway
key and reaches the upstream server with its own key there (never the other's, never its
gateway key); tokens are taken from the header only; /metrics answers only its scrape token.

The upstream server is a small recording MCP server on 127.0.0.1 (its URL is the one override,
through an MCPGW_ variable, as an operator would set it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from conftest import StartGateway

from gateway.config import load_config

pytestmark = pytest.mark.timeout(60)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "public-http.yaml"
TOOLS = [{"name": name, "inputSchema": {"type": "object"}} for name in ("lookup", "delete_index")]


class Upstream:
    """Answers initialize, tools/list and tools/call; keeps the Authorization of every tools/call."""

    def __init__(self) -> None:
        self.call_credentials: list[str | None] = []

    async def handle(self, request: web.Request) -> web.Response:
        if request.method != "POST":
            return web.Response(status=405)
        message = orjson.loads(await request.read())
        method, headers = message.get("method"), {}
        if "id" not in message:
            return web.Response(status=202)
        if method == "initialize":
            result: Any = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                           "serverInfo": {"name": "search", "version": "1"}}
            headers["Mcp-Session-Id"] = "upstream-session"
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            self.call_credentials.append(request.headers.get("Authorization"))
            result = {"content": [{"type": "text", "text": "found"}], "isError": False}
        else:  # the gateway's probes (server/discover, other lists) get what a tools-only server answers
            error = {"code": -32601, "message": f"Method not found: {method}"}
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "error": error}, headers=headers)
        return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": result}, headers=headers)


async def test_each_tenant_reaches_the_server_with_its_own_key(gateway: StartGateway, aiohttp_server: Any,
                                                               raw_client: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    upstream = Upstream()
    app = web.Application()
    app.router.add_route("*", "/mcp", upstream.handle)
    server = await aiohttp_server(app)
    keys = {"acme": "acme-gateway-key-0123456789", "globex": "globex-gateway-key-0123456789"}
    env = {"ACME_SEARCH_KEY": "acme-upstream-key", "GLOBEX_SEARCH_KEY": "globex-upstream-key",
           "METRICS_TOKEN": "scrape-token-0123456789", "MCPGW_BACKENDS__search__URL": str(server.make_url("/mcp"))}
    env |= {f"{tenant.upper()}_KEY_SHA256": hashlib.sha256(key.encode()).hexdigest() for tenant, key in keys.items()}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    running = await gateway(load_config(EXAMPLE))

    for tenant, key in keys.items():
        client = raw_client(running.url, key)
        await client.initialize()
        names = {tool["name"] for tool in (await client.call("tools/list"))["result"]["tools"]}
        assert names == ({"search__lookup"} if tenant == "globex" else {"search__lookup", "search__delete_index"})
        await client.call("tools/call", {"name": "search__lookup", "arguments": {}})
    assert upstream.call_credentials == ["Bearer acme-upstream-key", "Bearer globex-upstream-key"]

    in_query = raw_client(f"{running.url}?token={keys['acme']}")
    status, _, _ = await in_query.post(in_query.request("ping"))
    assert status == 401  # header only
    async with aiohttp.ClientSession() as session:
        async with session.get(running.base + "metrics") as scrape:
            assert scrape.status == 401
        async with session.get(running.base + "metrics",
                               headers={"Authorization": f"Bearer {env['METRICS_TOKEN']}"}) as scrape:
            assert scrape.status == 200 and "mcpgw_tool_calls_total" in await scrape.text()
