"""Virtual servers end to end, with the official SDK client in both eras against real backends.

Server `data` (tenant acme only) curates tools of two backends, each named by backend and the
backend's own name: `order` (crm's read_order, retitled and redescribed), `small_refund` (crm's
refund with `reason` fixed), `push_main` (git's push with `branch` fixed), and two items that cannot
stand: `ghost` (a tool git does not have) and `order_by_ref` (a fixed argument read_order lacks).
Acme's rules still decide each source: the support group may not refund, on `/mcp` or through a
server. Tenant ops may not use the server at all.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from conftest import RunningGateway, StartGateway, make_config, make_token
from mcp.shared.exceptions import MCPError
from test_policy import BACKEND, MODES, sdk, served

pytestmark = pytest.mark.timeout(120)

SERVER = {"tenants": ["acme"], "title": "Data team", "instructions": "Tools for the data team.",
          "tools": [
              {"backend": "crm", "tool": "read_order", "name": "order", "title": "Read an order",
               "description": "Look up one order by its id."},
              {"backend": "crm", "tool": "refund", "name": "small_refund", "fixed": {"reason": "via data"}},
              {"backend": "git", "tool": "push", "name": "push_main", "fixed": {"branch": "main"},
               "description": "Push the main branch."},
              {"backend": "git", "tool": "no_such_tool", "name": "ghost"},
              {"backend": "crm", "tool": "read_order", "name": "order_by_ref", "fixed": {"ref": "x"}},
          ],
          "prompts": [{"backend": "crm", "prompt": "summary", "name": "brief", "description": "A short brief."}]}
RULES = [{"name": "support-no-refunds", "effect": "deny", "callers": {"groups": ["support"]}, "tools": ["crm__refund"]}]


def servers_config(backends: list[str] = ("crm", "git"), **extra: Any) -> Any:  # type: ignore[assignment]
    listed = [{"name": name, "transport": "stdio", "command": BACKEND, **extra.get(name, {})} for name in backends]
    return make_config(listed, tenants={"acme": {"backends": ["*"], "rules": RULES}, "ops": {"backends": ["*"]}},
                       servers={"data": SERVER, "opsonly": {"tenants": ["ops"], "tools": []}})


def lead() -> str:
    return make_token("acme", sub="lee", groups=["leads"])


def support() -> str:
    return make_token("acme", sub="sam", groups=["support"])


@pytest.fixture
async def running(gateway: StartGateway) -> RunningGateway:
    return await gateway(servers_config())


def data_url(running: RunningGateway) -> str:
    return running.base + "servers/data/mcp"


@pytest.mark.parametrize("mode", MODES)
async def test_a_server_lists_its_tools_renamed_redescribed_and_without_fixed_arguments(
        running: RunningGateway, mode: str) -> None:
    async with sdk(data_url(running), lead(), mode) as client:
        assert client.instructions == "Tools for the data team."
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert sorted(tools) == ["order", "push_main", "small_refund"]  # ghost and order_by_ref are withdrawn
        assert tools["order"].title == "Read an order"
        assert tools["order"].description == "Look up one order by its id."
        assert tools["push_main"].description == "Push the main branch."
        assert tools["push_main"].input_schema.get("properties", {}) == {}
        assert "branch" not in tools["push_main"].input_schema.get("required", [])
        assert list(tools["small_refund"].input_schema["properties"]) == ["amount"]
        assert [p.name for p in (await client.list_prompts()).prompts] == ["brief"]


@pytest.mark.parametrize("mode", MODES)
async def test_calls_reach_the_source_with_the_fixed_arguments(running: RunningGateway, mode: str) -> None:
    async with sdk(data_url(running), lead(), mode) as client:
        assert (await client.call_tool("push_main", {})).content[0].text == "pushed main"  # type: ignore[union-attr]
        assert (await client.call_tool("order", {"order": "A-7"})).content[0].text == "order A-7"  # type: ignore[union-attr]
        assert (await client.call_tool("small_refund", {"amount": 5})).content[0].text == "refunded 5"  # type: ignore[union-attr]
        prompt = await client.get_prompt("brief", {"topic": "sales"})
        assert prompt.messages[0].content.text == "Summarize sales."  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
async def test_a_fixed_argument_sent_by_the_client_is_refused_before_the_backend(
        running: RunningGateway, mode: str) -> None:
    async with sdk(data_url(running), lead(), mode) as client:
        result = await client.call_tool("push_main", {"branch": "dev", "x": 1})
        assert result.is_error
        assert result.content[0].text == (  # type: ignore[union-attr]
            "Invalid arguments for tool push_main: 'branch' is set by this server and may not be given")
        invalid = await client.call_tool("small_refund", {"amount": "lots"})
        assert invalid.is_error
        assert invalid.content[0].text.startswith("Invalid arguments for tool small_refund: ")  # type: ignore[union-attr]
        assert "crm__refund" not in invalid.content[0].text  # type: ignore[union-attr]
    assert (await served(running.url)).get("push", 0) == 0  # the backend never saw it


@pytest.mark.parametrize("mode", MODES)
async def test_withdrawn_invisible_and_foreign_names_get_the_unknown_tool_error(
        running: RunningGateway, mode: str) -> None:
    async with sdk(data_url(running), support(), mode) as client:
        assert sorted(t.name for t in (await client.list_tools()).tools) == ["order", "push_main"]  # no refunds
        for name in ("ghost", "order_by_ref", "small_refund", "crm__read_order", "read_order"):
            with pytest.raises(MCPError) as refused:
                await client.call_tool(name, {"amount": 1, "order": "x"})
            assert refused.value.error.message == f"Unknown tool: {name}"


async def test_adding_and_reordering_backends_changes_none_of_its_names(gateway: StartGateway) -> None:
    first = await gateway(servers_config())
    # a new backend, listed first and unprefixed, whose tools take the exposed names crm's had
    later = await gateway(servers_config(["new", "git", "crm"], new={"namespace": ""}))
    listed = []
    for running in (first, later):
        async with sdk(data_url(running), lead(), "legacy") as client:
            listed.append([(t.name, t.description, t.input_schema) for t in (await client.list_tools()).tools])
            assert (await client.call_tool("push_main", {})).content[0].text == "pushed main"  # type: ignore[union-attr]
    assert listed[0] == listed[1]


async def test_who_may_use_a_server_and_where_its_sessions_work(running: RunningGateway) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    async with httpx2.AsyncClient(headers=headers) as http:
        def auth(token: str, session: str | None = None) -> dict[str, str]:
            extra = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"} if session else {}
            return {"Authorization": f"Bearer {token}", **extra}

        ops = make_token("ops", sub="o")
        refused = [await http.post(running.base + path, json=init, headers=auth(token))
                   for path, token in (("servers/data/mcp", ops), ("servers/nope/mcp", lead()))]
        assert [r.status_code for r in refused] == [404, 404]
        assert refused[0].text == refused[1].text  # a server one may not use looks like one that does not exist
        unauthenticated = await http.post(data_url(running), json=init)
        assert unauthenticated.status_code == 401
        on_server = (await http.post(data_url(running), json=init, headers=auth(lead()))).headers["Mcp-Session-Id"]
        on_gateway = (await http.post(running.url, json=init, headers=auth(lead()))).headers["Mcp-Session-Id"]
        crossed = [await http.post(data_url(running), json=listing, headers=auth(lead(), on_gateway)),
                   await http.post(running.url, json=listing, headers=auth(lead(), on_server))]
        assert [r.status_code for r in crossed] == [404, 404]
        own = await http.post(data_url(running), json=listing, headers=auth(lead(), on_server))
        assert [t["name"] for t in own.json()["result"]["tools"]] == ["order", "small_refund", "push_main"]
        resources = {"jsonrpc": "2.0", "id": 3, "method": "resources/list"}
        unknown_method = await http.post(data_url(running), json=resources, headers=auth(lead(), on_server))
        assert unknown_method.json()["error"]["code"] == -32601


async def test_withdrawn_items_are_shown_to_admins_logged_and_counted(running: RunningGateway) -> None:
    from conftest import SCRAPE_TOKEN

    admin = {"Authorization": f"Bearer {make_token('ops', sub='admin', scope='mcpgw:admin')}"}
    async with httpx2.AsyncClient() as http:
        report = (await http.get(running.base + "admin/servers", headers=admin)).json()
        refused = await http.get(running.base + "admin/servers", headers={"Authorization": f"Bearer {lead()}"})
        text = (await http.get(running.base + "metrics", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"})).text
    assert refused.status_code == 403
    data = next(s for s in report["servers"] if s["name"] == "data")
    states = {item["name"]: (item["state"], item.get("reason")) for item in data["items"]}
    assert states == {"order": ("serving", None), "small_refund": ("serving", None), "push_main": ("serving", None),
                      "ghost": ("withdrawn", "missing"), "order_by_ref": ("withdrawn", "argument_gone"),
                      "brief": ("serving", None)}
    assert next(i for i in data["items"] if i["name"] == "push_main")["fixed"] == ["branch"]  # names, never values
    assert "via data" not in json.dumps(report)
    assert {(e["item"], e["event"]) for e in data["recent"]} == {("ghost", "withdrawn"), ("order_by_ref", "withdrawn")}
    assert 'mcpgw_server_items_withdrawn_total{reason="missing",server="data"} 1.0' in text
    assert 'mcpgw_server_items_withdrawn_total{reason="argument_gone",server="data"} 1.0' in text


async def test_each_server_is_a_protected_resource_of_its_own(running: RunningGateway) -> None:
    well_known = running.base + ".well-known/oauth-protected-resource"
    async with httpx2.AsyncClient() as http:
        challenge = (await http.post(data_url(running), json={})).headers["WWW-Authenticate"]
        own = (await http.get(f"{well_known}/servers/data/mcp")).json()
        gateway_own = (await http.get(f"{well_known}/mcp")).json()
        unknown = await http.get(f"{well_known}/servers/nope/mcp")
    assert f'resource_metadata="{well_known}/servers/data/mcp"' in challenge
    assert own["resource"] == data_url(running)
    assert gateway_own["resource"] == running.url
    assert unknown.status_code == 404


async def test_the_request_line_names_the_server_and_the_source_tool(running: RunningGateway) -> None:
    from structlog.testing import capture_logs

    with capture_logs() as lines:
        async with sdk(data_url(running), lead(), "legacy") as client:
            await client.list_tools()
            await client.call_tool("push_main", {})
    requests = {line["method"]: line for line in lines if line.get("event") == "request" and line.get("method")}
    assert requests["tools/list"]["server"] == "data"
    called = requests["tools/call"]
    assert (called["server"], called["tool"], called["backend"]) == ("data", "git__push", "git")  # bounded labels


async def test_the_cli_explains_a_callers_view_through_a_server(tmp_path: Any) -> None:
    import asyncio
    import sys

    import yaml
    from test_policy import BACKEND as COMMAND

    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({
        "backends": [{"name": name, "transport": "stdio", "command": COMMAND} for name in ("crm", "git")],
        "tenants": {"acme": {"backends": ["*"], "rules": RULES}}, "servers": {"data": SERVER}}))

    async def explain(*args: str) -> Any:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway", "policy", "explain", "--config", str(config), "--tenant", "acme",
            "--server", "data", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        return json.loads(out)

    listing = await explain("--sub", "sam", "--groups", "support", "--list")
    tools = {t["name"]: t for t in listing["tools"]}
    assert tools["order"]["source"] == "crm__read_order" and tools["order"]["listed"]["allowed"]
    assert tools["small_refund"]["listed"] == {"allowed": False, "rule": "support-no-refunds", "reason": "rule"}
    assert tools["ghost"]["state"].startswith("withdrawn: ") and "listed" not in tools["ghost"]
    assert listing["prompts"] == [{"name": "brief", "source": "crm__summary", "state": "serving",
                                   "listed": {"allowed": True, "rule": "default"}}]
    push = await explain("--sub", "lee", "--tool", "push_main", "--args", "{}")
    assert (push["source"], push["fixed"], push["inputSchema"].get("properties")) == ("git__push", ["branch"], {})
    assert push["call"]["allowed"] is True
    fixed = await explain("--sub", "lee", "--tool", "push_main", "--args", '{"branch": "dev"}')
    assert fixed["call"] == {"allowed": False, "reason": "fixed", "message": "'branch' is set by this server"}


async def test_admins_ask_what_a_caller_gets_through_a_server(running: RunningGateway) -> None:
    admin = {"Authorization": f"Bearer {make_token('ops', sub='admin', scope='mcpgw:admin')}"}
    url = running.base + "admin/policy/explain"
    async with httpx2.AsyncClient(headers=admin) as http:
        listing = (await http.get(url, params={"tenant": "acme", "sub": "sam", "groups": "support", "list": "1",
                                               "server": "data"})).json()
        tool = (await http.get(url, params={"tenant": "acme", "sub": "lee", "tool": "small_refund",
                                            "args": '{"amount": 3}', "server": "data"})).json()
        unknown = await http.get(url, params={"tenant": "acme", "sub": "lee", "list": "1", "server": "nope"})
    assert {t["name"]: t.get("listed", {}).get("allowed") for t in listing["tools"]} == {
        "order": True, "small_refund": False, "push_main": True, "ghost": None, "order_by_ref": None}
    assert (tool["source"], tool["fixed"], tool["call"]["allowed"]) == ("crm__refund", ["reason"], True)
    assert list(tool["inputSchema"]["properties"]) == ["amount"]
    assert unknown.status_code == 400
