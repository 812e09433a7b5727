"""A backend's requests to the client of a call (sampling, elicitation, roots) and its log messages,
relayed by the gateway: the official SDK client gets the same exchanges direct and through it."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from backend_fixtures import REPO_ROOT, StartBackend, stdio_command
from conftest import JWT_SECRET, StartGateway, http_backend_config, make_config, make_token, sdk_client
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent
from observability.helpers import scrape

pytestmark = pytest.mark.timeout(120)

EVERY_BACKEND = {"backends": ["*"]}

TOOLS: list[tuple[str, dict[str, Any]]] = [
    ("summarize", {"text": "the gateway relays what a backend asks"}),
    ("confirm", {"action": "delete the draft"}),
    ("sign_in", {"url": "https://auth.example.com/start"}),
    ("workspace", {}),
]


def untraced(params: dict[str, Any]) -> dict[str, Any]:
    """A request's params without its W3C trace context: through the gateway the backend continues the
    request's trace (the gateway passes one in `_meta`), and its SDK sends it on in its own requests."""
    meta = params.get("meta")
    if isinstance(meta, dict):
        meta = {key: value for key, value in meta.items() if key not in ("traceparent", "tracestate")} or None
        params = {**params, "meta": meta}
    return params


class Recorder:
    """The SDK client's callbacks: they answer like a real client would and record what they were asked."""

    def __init__(self, label: str = "client") -> None:
        self.label = label
        self.asked: list[tuple[str, Any]] = []
        self.logs: list[tuple[str, Any]] = []

    async def sampling(self, context: Any, params: Any) -> CreateMessageResult:
        self.asked.append(("sampling", untraced(params.model_dump())))
        text = f"{self.label}: {len(params.messages)} message(s)"
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=text), model="test-model")

    async def elicitation(self, context: Any, params: Any) -> ElicitResult:
        asked = params.model_dump(exclude={"elicitation_id"})  # minted per call by the backend
        self.asked.append(("elicitation", untraced(asked)))
        await asyncio.sleep(0.2)  # a user takes a moment: concurrent calls overlap
        if getattr(params, "mode", None) == "url":
            return ElicitResult(action="accept")
        return ElicitResult(action="accept", content={"confirm": True, "note": self.label})

    async def roots(self, context: Any) -> ListRootsResult:
        self.asked.append(("roots", None))
        return ListRootsResult(roots=[Root(uri="file:///work/project", name="project")])

    async def logging(self, params: Any) -> None:
        self.logs.append((params.level, params.data))

    def callbacks(self) -> dict[str, Any]:
        return {"sampling_callback": self.sampling, "elicitation_callback": self.elicitation,
                "list_roots_callback": self.roots, "logging_callback": self.logging}


@pytest.fixture
async def topology(http_backend: StartBackend, gateway: StartGateway) -> dict[str, Any]:
    """The assistant backend over HTTP (`web`) and as a stdio child (`local`) behind one gateway."""
    web = await http_backend("assistant")
    local = {"name": "local", "transport": "stdio", "command": stdio_command("assistant"), "cwd": str(REPO_ROOT)}
    running = await gateway(make_config([http_backend_config("web", web.url), local],
                                        tenants={"acme": EVERY_BACKEND, "globex": EVERY_BACKEND}))
    return {"gateway": running, "web": web.url}


def direct(topology: dict[str, Any], backend: str, **callbacks: Any) -> Any:
    if backend == "web":
        return sdk_client(topology["web"], **callbacks)
    command = stdio_command("assistant")
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=REPO_ROOT)
    return Client(params, mode="legacy", read_timeout_seconds=30, **callbacks)


@asynccontextmanager
async def through(topology: dict[str, Any], tenant: str = "acme", **callbacks: Any) -> AsyncIterator[Client]:
    async with sdk_client(topology["gateway"].url, make_token(tenant), **callbacks) as client:
        yield client


@pytest.mark.parametrize("backend", ["web", "local"])
async def test_sampling_elicitation_and_roots_are_the_same_direct_and_through_the_gateway(
        topology: dict[str, Any], backend: str) -> None:
    mine, theirs = Recorder(), Recorder()
    async with direct(topology, backend, **theirs.callbacks()) as client:
        expected = [(await client.call_tool(tool, args)).model_dump() for tool, args in TOOLS]
    async with through(topology, **mine.callbacks()) as client:
        got = [(await client.call_tool(f"{backend}__{tool}", args)).model_dump() for tool, args in TOOLS]
    assert got == expected
    assert all(not result["is_error"] for result in got), got
    assert mine.asked == theirs.asked
    assert [kind for kind, _ in mine.asked] == ["sampling", "elicitation", "elicitation", "roots"]


@pytest.mark.parametrize("backend", ["web", "local"])
async def test_log_messages_and_progress_are_the_same_direct_and_through_the_gateway(
        topology: dict[str, Any], backend: str) -> None:
    mine, theirs = Recorder(), Recorder()
    progress: dict[str, list[float]] = {"direct": [], "through": []}

    def on_progress(where: str) -> Any:
        async def record(value: float, total: float | None, message: str | None) -> None:
            progress[where].append(value)
        return record

    async with direct(topology, backend, **theirs.callbacks()) as client:
        await client.call_tool("chatty", {"steps": 2}, progress_callback=on_progress("direct"))
    async with through(topology, **mine.callbacks()) as client:
        await client.call_tool(f"{backend}__chatty", {"steps": 2}, progress_callback=on_progress("through"))
    assert mine.logs == theirs.logs
    assert len(mine.logs) == 8
    assert progress["through"] == progress["direct"] == [1, 2]


@pytest.mark.parametrize("backend", ["web", "local"])
async def test_the_clients_log_level_filters_what_it_is_relayed(topology: dict[str, Any], backend: str) -> None:
    mine = Recorder()
    async with through(topology, **mine.callbacks()) as client:
        await client.set_logging_level("warning")
        await client.call_tool(f"{backend}__chatty", {"steps": 2})
        assert {level for level, _ in mine.logs} == {"warning", "error"}
        assert len(mine.logs) == 4


@pytest.mark.parametrize("backend", ["web", "local"])
async def test_an_undeclared_capability_is_refused_at_once_and_the_call_fails_cleanly(
        topology: dict[str, Any], backend: str) -> None:
    async with through(topology) as client:  # declares nothing: no callbacks
        result = await client.call_tool(f"{backend}__summarize", {"text": "hello"})
        assert result.is_error
        text = result.content[0].text  # type: ignore[union-attr]
        assert "did not declare sampling" in text
        refused_after_ms = float(re.search(r"after (\d+(?:\.\d+)?) ms", text).group(1))  # type: ignore[union-attr]
        assert refused_after_ms < 100
        later = await client.call_tool(f"{backend}__chatty", {"steps": 1})  # the session goes on working
        assert not later.is_error


def stdio_gateway(tmp_path: Path) -> StdioServerParameters:
    """`mcp-gateway stdio` in front of the assistant backend as a stdio child (`local`)."""
    local = {"name": "local", "transport": "stdio", "command": stdio_command("assistant"), "cwd": str(REPO_ROOT)}
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"auth": {"jwt": {"secret": JWT_SECRET}}, "backends": [local],
                                      "tenants": {"acme": EVERY_BACKEND}, "logging": {"level": "warning"}}))
    return StdioServerParameters(command=sys.executable, args=["-m", "gateway", "stdio", "--config", str(config)],
                                 env={"MCP_GATEWAY_TOKEN": make_token("acme"), "PATH": os.environ["PATH"]},
                                 cwd=REPO_ROOT)


async def test_a_stdio_client_of_mcp_gateway_stdio_gets_the_same_exchanges(
        topology: dict[str, Any], tmp_path: Path) -> None:
    mine, theirs = Recorder(), Recorder()
    async with direct(topology, "local", **theirs.callbacks()) as client:
        expected = [(await client.call_tool(tool, args)).model_dump() for tool, args in TOOLS]
        await client.call_tool("chatty", {"steps": 1})
    async with Client(stdio_gateway(tmp_path), mode="legacy", read_timeout_seconds=30, **mine.callbacks()) as client:
        got = [(await client.call_tool(f"local__{tool}", args)).model_dump() for tool, args in TOOLS]
        await client.set_logging_level("error")
        await client.call_tool("local__chatty", {"steps": 1})
    assert got == expected
    assert mine.asked == theirs.asked
    assert mine.logs == [(level, data) for level, data in theirs.logs if level == "error"]


async def test_a_2026_stdio_client_of_mcp_gateway_stdio_answers_in_rounds_what_a_legacy_one_answers_live(
        topology: dict[str, Any], tmp_path: Path) -> None:
    """The SDK client in mode="auto" opens a 2026 connection (its first request, server/discover, carries
    the envelope); the backend's questions reach it as InputRequiredResults over stdout, its retries
    carry the answers back."""
    mine, theirs = Recorder(), Recorder()
    async with direct(topology, "local", **theirs.callbacks()) as client:
        expected = [(await client.call_tool(tool, args)).model_dump() for tool, args in TOOLS]
    async with Client(stdio_gateway(tmp_path), mode="auto", read_timeout_seconds=30, **mine.callbacks()) as client:
        assert client.protocol_version == "2026-07-28"
        names = {tool.name for tool in (await client.list_tools()).tools}
        got = [(await client.call_tool(f"local__{tool}", args)).model_dump() for tool, args in TOOLS]
    assert {f"local__{tool}" for tool, _ in TOOLS} <= names
    assert [result["content"] for result in got] == [result["content"] for result in expected]
    assert mine.asked == theirs.asked


@pytest.mark.parametrize("backend", ["web", "local"])
async def test_a_client_never_receives_another_sessions_request(topology: dict[str, Any], backend: str) -> None:
    clients = [Recorder(f"client-{n}") for n in range(4)]
    tenants = ["acme", "acme", "globex", "globex"]

    async def confirm(recorder: Recorder, tenant: str) -> tuple[bool, str]:
        async with through(topology, tenant, **recorder.callbacks()) as client:
            try:
                result = await client.call_tool(f"{backend}__confirm", {"action": f"act for {recorder.label}"})
            except MCPError as exc:  # the SDK server passes the refusal on as the call's error
                return False, str(exc)
            return not result.is_error, result.content[0].text  # type: ignore[union-attr]

    results = await asyncio.gather(*(confirm(r, t) for r, t in zip(clients, tenants, strict=True)))
    for recorder, (answered, text) in zip(clients, results, strict=True):
        questions = [asked["message"] for _, asked in recorder.asked]
        if backend == "web" or answered:  # HTTP: every call's question on its own stream
            assert text == f"confirmed=True note={recorder.label}"
            assert questions == [f"Do you want to act for {recorder.label}?"]
        else:  # one stdio child, several calls in flight: refused rather than guessed
            assert "several calls" in text and questions == []


async def test_a_request_outside_any_call_is_refused_not_guessed(topology: dict[str, Any]) -> None:
    mine = Recorder()
    async with through(topology, **mine.callbacks()) as client:
        await client.call_tool("web__workspace", {})  # the session's own stream is open by now
        await asyncio.sleep(0.5)
        aside = await client.call_tool("web__workspace_aside", {})
    assert aside.is_error
    assert "outside any call" in aside.content[0].text  # type: ignore[union-attr]
    assert [kind for kind, _ in mine.asked] == ["roots"]  # only the related one reached the client


async def test_relayed_requests_are_counted_by_kind_and_outcome_and_logged(topology: dict[str, Any]) -> None:
    mine = Recorder()
    with structlog.testing.capture_logs() as lines:
        async with through(topology, **mine.callbacks()) as client:
            await client.call_tool("web__summarize", {"text": "x"})
        async with through(topology) as client:
            await client.call_tool("web__summarize", {"text": "x"})
    calls = [line for line in lines if line.get("event") == "request" and line.get("method") == "tools/call"]
    assert [line["client_requests"] for line in calls] == [["sampling/createMessage:ok"],
                                                           ["sampling/createMessage:undeclared"]]
    text, _ = await scrape(f"{topology['gateway'].base}metrics")
    assert 'mcpgw_client_requests_total{kind="sampling/createMessage",outcome="ok"} 1.0' in text
    assert 'mcpgw_client_requests_total{kind="sampling/createMessage",outcome="undeclared"} 1.0' in text


async def test_a_level_reaches_backends_that_declared_logging_and_only_ever_makes_them_more_verbose(
        gateway: StartGateway) -> None:
    leveled = {"name": "leveled", "transport": "stdio", "cwd": str(REPO_ROOT),
               "command": [sys.executable, str(Path(__file__).with_name("leveled_backend.py"))]}
    running = await gateway(make_config([leveled], tenants={"acme": EVERY_BACKEND, "globex": EVERY_BACKEND}))

    async def level_after(tenant: str, level: str) -> str:
        async with sdk_client(running.url, make_token(tenant)) as client:
            assert client.server_capabilities is not None and client.server_capabilities.logging is not None
            await client.set_logging_level(level)  # type: ignore[arg-type]
            return (await client.call_tool("leveled__level", {})).content[0].text  # type: ignore[union-attr]

    assert await level_after("acme", "warning") == "warning"
    assert await level_after("globex", "error") == "warning"  # one child serves both: never quieter
    assert await level_after("globex", "debug") == "debug"


@pytest.mark.parametrize("backend", ["web", "local"])
async def test_a_call_the_client_cancels_withdraws_the_question_it_was_asking(
        topology: dict[str, Any], backend: str) -> None:
    asked, withdrawn = asyncio.Event(), asyncio.Event()

    async def never_answers(context: Any, params: Any) -> ElicitResult:
        asked.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            withdrawn.set()  # the gateway told the client it no longer waits
            raise
        return ElicitResult(action="cancel")

    async with through(topology, elicitation_callback=never_answers) as client:
        call = asyncio.create_task(client.call_tool(f"{backend}__confirm", {"action": "wait"}))
        await asyncio.wait_for(asked.wait(), 10)
        call.cancel()  # the SDK client sends notifications/cancelled for its call
        await asyncio.wait_for(withdrawn.wait(), 10)
        assert not (await client.call_tool(f"{backend}__chatty", {"steps": 1})).is_error


async def test_an_unknown_log_level_is_invalid_params(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(make_config([]))
    client = raw_client(running.url, make_token("acme"))
    await client.initialize()
    for level in ("loud", "WARNING", None, 3):
        reply = await client.call("logging/setLevel", {"level": level})
        assert reply["error"]["code"] == -32602 and "debug, info, notice" in reply["error"]["message"]
    assert (await client.call("logging/setLevel", {"level": "notice"}))["result"] == {}
