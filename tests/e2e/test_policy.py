"""Per-caller policy end to end, with the official SDK client in both eras against real backends.

One tenant, acme, denies by default. Its support group reads orders; its billing-leads group also
refunds, up to 500 (an overlay the leads see in their listed schema); the CI bot's API key (group
`bots`) pushes to git and nothing else. Tenant `ops` sees everything, to ask the backends what
they served: a call the policy refuses never reaches them.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import httpx2
import pytest
from conftest import RunningGateway, StartGateway, make_config, make_token
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.timeout(120)

BACKEND = [sys.executable, str(Path(__file__).with_name("counting_backend.py"))]
BOT_KEY = "test-bot-key-for-the-policy-tests"
MODES = ["legacy", "auto"]  # a handshake-era session, and the 2026-07-28 stateless revision
RULES = [
    {"name": "support-reads", "effect": "allow", "callers": {"groups": ["support", "billing-leads"]},
     "tools": ["crm__read_*"], "prompts": ["crm__*"], "resources": ["crm+*"]},
    {"name": "leads-refund", "effect": "allow", "callers": {"groups": ["billing-leads"]}, "tools": ["crm__refund"],
     "arguments": {"amount": {"maximum": 500}}},
    {"name": "bot-pushes", "effect": "allow", "callers": {"groups": ["bots"]}, "tools": ["git__push"]},
]


def policy_config(rules: list[dict[str, Any]] = RULES) -> Any:
    backends = [{"name": name, "transport": "stdio", "command": BACKEND} for name in ("crm", "git")]
    return make_config(backends, tenants={"acme": {"backends": ["*"], "default": "deny", "rules": rules},
                                          "ops": {"backends": ["*"]}},
                       auth={"api_keys": [{"sha256": hashlib.sha256(BOT_KEY.encode()).hexdigest(), "tenant": "acme",
                                           "subject": "ci-bot", "groups": ["bots"]}]})


def alice_token() -> str:  # tokens are minted when used: a long run must not outlive them
    return make_token("acme", sub="alice", groups=["support"])


def bob_token() -> str:
    return make_token("acme", sub="bob", groups="support billing-leads")  # a space-separated claim works too


def ops_token() -> str:
    return make_token("ops", sub="ops")


@asynccontextmanager
async def sdk(url: str, token: str, mode: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=60))
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode,  # type: ignore[arg-type]
                            read_timeout_seconds=30) as client:
        yield client


@pytest.fixture
async def running(gateway: StartGateway) -> RunningGateway:
    return await gateway(policy_config())


async def served(url: str) -> dict[str, int]:
    async with sdk(url, ops_token(), "legacy") as ops:
        result = await ops.call_tool("crm__counted", {})
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


async def tool_names(client: Client) -> list[str]:
    return sorted(tool.name for tool in (await client.list_tools()).tools)


@pytest.mark.parametrize("mode", MODES)
async def test_each_user_lists_and_calls_exactly_what_the_rules_give(running: RunningGateway, mode: str) -> None:
    async with sdk(running.url, alice_token(), mode) as alice, sdk(running.url, bob_token(), mode) as bob, \
            sdk(running.url, BOT_KEY, mode) as bot:
        assert await tool_names(alice) == ["crm__read_order"]
        assert await tool_names(bob) == ["crm__read_order", "crm__refund"]
        assert await tool_names(bot) == ["git__push"]
        assert (await alice.call_tool("crm__read_order", {"order": "A-1"})).content[0].text == "order A-1"
        assert (await bot.call_tool("git__push", {"branch": "main"})).content[0].text == "pushed main"
        assert (await bob.call_tool("crm__refund", {"amount": 500})).content[0].text == "refunded 500"
        for client, tool in ((alice, "crm__refund"), (bot, "crm__read_order"), (alice, "git__push")):
            with pytest.raises(MCPError) as refused:
                await client.call_tool(tool, {})
            assert refused.value.error.message == f"Unknown tool: {tool}"  # as for a tool nobody has
        assert [p.name for p in (await alice.list_prompts()).prompts] == ["crm__summary"]
        assert (await bot.list_prompts()).prompts == []
        assert [str(r.uri) for r in (await bob.list_resources()).resources] == ["crm+orders://all"]


@pytest.mark.parametrize("mode", MODES)
async def test_the_overlay_is_listed_and_a_call_past_it_never_reaches_the_backend(running: RunningGateway,
                                                                                mode: str) -> None:
    async with sdk(running.url, bob_token(), mode) as bob, sdk(running.url, ops_token(), mode) as ops:
        refund = next(t for t in (await bob.list_tools()).tools if t.name == "crm__refund")
        assert refund.input_schema["properties"]["amount"]["maximum"] == 500
        plain = next(t for t in (await ops.list_tools()).tools if t.name == "crm__refund")
        assert "maximum" not in plain.input_schema["properties"]["amount"]  # another caller: the backend's schema
        before = (await served(running.url)).get("refund", 0)
        result = await bob.call_tool("crm__refund", {"amount": 501, "reason": "too much"})
        assert result.is_error
        assert result.content[0].text == (  # type: ignore[union-attr]
            "Invalid arguments for tool crm__refund: 501 is greater than the maximum of 500 (at amount)")
        assert (await served(running.url)).get("refund", 0) == before
        assert (await ops.call_tool("crm__refund", {"amount": 501})).content[0].text == "refunded 501"


async def test_a_refusal_names_its_rule_in_the_log_and_counts_in_the_metrics(running: RunningGateway) -> None:
    from conftest import SCRAPE_TOKEN

    async with sdk(running.url, bob_token(), "legacy") as bob, sdk(running.url, alice_token(), "legacy") as alice:
        await bob.call_tool("crm__refund", {"amount": 9000})
        with pytest.raises(MCPError):
            await alice.call_tool("crm__refund", {"amount": 1})
    async with httpx2.AsyncClient() as http:
        text = (await http.get(running.base + "metrics", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"})).text
    assert 'mcpgw_policy_denied_total{reason="arguments",tenant="acme"} 1.0' in text
    assert 'mcpgw_policy_denied_total{reason="default",tenant="acme"} 1.0' in text
    assert "alice" not in text and "bob" not in text  # no subject in any label


async def test_admins_ask_what_the_rules_give_a_caller(running: RunningGateway) -> None:
    admin = {"Authorization": f"Bearer {make_token('ops', sub='admin', scope='mcpgw:admin')}"}
    async with httpx2.AsyncClient(headers=admin) as http:
        url = running.base + "admin/policy/explain"
        tool = (await http.get(url, params={"tenant": "acme", "sub": "bob", "groups": "billing-leads",
                                            "tool": "crm__refund", "args": '{"amount": 700}'})).json()
        listing = (await http.get(url, params={"tenant": "acme", "sub": "bot", "groups": "bots", "list": "1"})).json()
        bad = await http.get(url, params={"tenant": "acme", "sub": "bob"})
        user = await http.get(url, params={"tenant": "acme", "sub": "bob", "list": "1"},
                              headers={"Authorization": f"Bearer {bob_token()}"})
    assert tool["listed"] == {"allowed": True, "rule": "leads-refund"}
    assert tool["inputSchema"]["properties"]["amount"]["maximum"] == 500
    assert tool["call"]["reason"] == "arguments" and "maximum of 500" in tool["call"]["message"]
    allowed = {t["name"]: t["rule"] for t in listing["tools"] if t["allowed"]}
    assert allowed == {"git__push": "bot-pushes"}
    assert bad.status_code == 400
    assert user.status_code == 403  # no admin scope


async def test_the_cli_explains_a_tool_and_a_listing(tmp_path: Path) -> None:
    import asyncio

    import yaml

    config = tmp_path / "gateway.yaml"
    backends = [{"name": name, "transport": "stdio", "command": BACKEND} for name in ("crm", "git")]
    config.write_text(yaml.safe_dump({"backends": backends, "tenants": {
        "acme": {"backends": ["*"], "default": "deny", "rules": RULES}}}))

    async def explain(*args: str) -> Any:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway", "policy", "explain", "--config", str(config), "--tenant", "acme", *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        return json.loads(out)

    refund = await explain("--sub", "alice", "--groups", "support", "--tool", "crm__refund")
    assert refund["listed"] == {"allowed": False, "rule": "default", "reason": "default"}
    assert "inputSchema" not in refund
    listing = await explain("--sub", "bob", "--groups", "billing-leads", "--list")
    assert {t["name"] for t in listing["tools"] if t["allowed"]} == {"crm__read_order", "crm__refund"}
    assert [p["rule"] for p in listing["prompts"] if p["name"] == "crm__summary"] == ["support-reads"]


@pytest.mark.parametrize(("token", "tool", "arguments", "rule", "reason"), [
    (bob_token, "crm__refund", {"amount": 9000}, "leads-refund", "arguments"),
    (alice_token, "crm__refund", {"amount": 1}, "default", "default"),
])
async def test_the_request_line_of_a_refusal_names_the_deciding_rule(
        running: RunningGateway, token: Callable[[], str], tool: str, arguments: dict[str, Any], rule: str,
        reason: str) -> None:
    from structlog.testing import capture_logs

    with capture_logs() as lines:
        async with sdk(running.url, token(), "legacy") as client:
            with suppress(MCPError):
                await client.call_tool(tool, arguments)
    denied = [line for line in lines if line.get("outcome") == "denied"]
    assert len(denied) == 1, lines
    assert (denied[0]["rule"], denied[0]["denied"], denied[0]["method"]) == (rule, reason, "tools/call")
    # Arguments are never logged (the random hex ids may hold "9000" by chance, so they are left out).
    fields = {key: value for key, value in denied[0].items() if key not in ("request_id", "trace_id")}
    assert "amount" not in str(denied[0]) and "9000" not in str(fields)
