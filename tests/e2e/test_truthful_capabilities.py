"""What `initialize` and `server/discover` advertise is served by a backend the tenant sees, nothing more.

Every combination of the capabilities a backend can declare (tools, prompts, resources with or without
`subscribe`, completions, logging, 2025-11-25 task-augmented tools/call) is one fake handshake-era backend,
each seen by a tenant of its own, all behind one gateway. Each tenant's session client must be offered
exactly what its backend serves, and its 2026 client the same in the 2026 form; a tenant that sees two
backends is offered their union (tasks only from a backend with tools to call with them).
"""

from __future__ import annotations

import itertools
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from conftest import RawClient, RunningGateway, StartGateway, make_config, make_token
from stateless_client import StatelessClient

pytestmark = pytest.mark.timeout(120)

DECLARABLE = ("tools", "prompts", "resources", "subscribe", "completions", "logging", "tasks")
COMBINATIONS = [frozenset(c) for n in range(len(DECLARABLE) + 1) for c in itertools.combinations(DECLARABLE, n)
                if "subscribe" not in c or "resources" in c]
ITEMS = {"tools": ("tools/list", "tools", {"name": "t", "inputSchema": {"type": "object"}}),
         "prompts": ("prompts/list", "prompts", {"name": "p"}),
         "resources": ("resources/list", "resources", {"uri": "memo://r", "name": "r"})}


def label(declared: frozenset[str]) -> str:
    return "-".join(sorted(declared)) or "none"


def declared_capabilities(declared: frozenset[str]) -> dict[str, Any]:
    capabilities: dict[str, Any] = {kind: {} for kind in ("tools", "prompts", "completions", "logging")
                                    if kind in declared}
    if "resources" in declared:
        capabilities["resources"] = {"subscribe": True} if "subscribe" in declared else {}
    if "tasks" in declared:
        capabilities["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    return capabilities


def fake_backends() -> web.Application:
    """One handshake-era backend per combination, at /{label}/mcp, listing one item of each kind it declares."""

    async def handle(request: web.Request) -> web.StreamResponse:
        declared = frozenset(request.match_info["combo"].split("-")) - {"none"}
        body = await request.json() if request.method == "POST" else {}
        method = body.get("method")
        if request.method != "POST":
            return web.Response(status=405)
        if "id" not in body:
            return web.Response(status=202)
        if method == "initialize":
            result: Any = {"protocolVersion": body["params"]["protocolVersion"], "capabilities":
                           declared_capabilities(declared), "serverInfo": {"name": "f", "version": "1"}}
            return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": result},
                                     headers={"Mcp-Session-Id": "s"})
        listed = next(((key, item) for kind, (m, key, item) in ITEMS.items() if m == method and kind in declared), None)
        if listed is None and method == "resources/templates/list" and "resources" in declared:
            listed = ("resourceTemplates", None)
        if listed is None:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            return web.json_response({"jsonrpc": "2.0", "id": body["id"], "error": error})
        key, item = listed
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": {key: [item] if item else []}})

    app = web.Application()
    app.router.add_route("*", "/{combo}/mcp", handle)
    return app


def expected(declared: frozenset[str], session: bool = False) -> dict[str, Any]:
    """The capabilities a client of a tenant whose backends declared `declared` is offered (a 2025-11-25 session's
    with `session`: tasks relayed for calling tools; none at 2026, where tasks are an extension)."""
    changed = {"listChanged": True}
    offered: dict[str, Any] = {kind: changed for kind in ("tools", "prompts", "resources") if kind in declared}
    if "subscribe" in declared and "resources" in declared:
        offered["resources"] = {"subscribe": True, **changed}
    if "completions" in declared and ({"prompts", "resources"} & declared):
        offered["completions"] = {}
    if "logging" in declared:
        offered["logging"] = {}
    if session and {"tasks", "tools"} <= declared:
        offered["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    return offered


@pytest.fixture
async def running(aiohttp_server: Any, gateway: StartGateway) -> RunningGateway:
    fakes = await aiohttp_server(fake_backends())
    backends = [{"name": f"b{n}", "transport": "http", "url": str(fakes.make_url(f"/{label(c)}/mcp"))}
                for n, c in enumerate(COMBINATIONS)]
    tenants: dict[str, Any] = {f"t{n}": {"backends": [f"b{n}"]} for n in range(len(COMBINATIONS))}
    tenants["acme"] = {"backends": []}  # the test config's API key names it
    tenants["union"] = {"backends": [f"b{COMBINATIONS.index(frozenset({'tools'}))}",
                                     f"b{COMBINATIONS.index(frozenset({'resources', 'subscribe', 'logging'}))}"]}
    tenants["apart"] = {"backends": [f"b{COMBINATIONS.index(frozenset({'tools'}))}",
                                     f"b{COMBINATIONS.index(frozenset({'prompts', 'tasks'}))}"]}
    return await gateway(make_config(backends, tenants))


async def offered(running: RunningGateway, tenant: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a session client and a 2026 client of `tenant` are offered."""
    token = make_token(tenant)
    async with aiohttp.ClientSession() as http:
        session = (await RawClient(http, running.url, token).initialize())["result"]["capabilities"]
        discovered = (await StatelessClient(http, running.url, token).call("server/discover"))["result"]
    return session, discovered["capabilities"]


async def test_each_combination_is_offered_exactly_what_its_backend_serves(running: RunningGateway) -> None:
    for n, declared in enumerate(COMBINATIONS):
        session, discovered = await offered(running, f"t{n}")
        assert session == expected(declared, session=True), label(declared)
        assert discovered == expected(declared), label(declared)  # the same at 2026: listen streams serve changes


async def test_a_tenant_of_two_backends_is_offered_their_union(running: RunningGateway) -> None:
    session, discovered = await offered(running, "union")
    assert session == discovered == expected(frozenset({"tools", "resources", "subscribe", "logging"}), session=True)


async def test_tasks_are_offered_only_by_a_backend_that_has_tools_to_call_with_them(running: RunningGateway) -> None:
    session, discovered = await offered(running, "apart")  # one backend's tools, another's tasks
    assert "tasks" not in session and "tasks" not in discovered
