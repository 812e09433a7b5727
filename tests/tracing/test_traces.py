"""One trace from the SDK client through the gateway into an SDK backend, as the OTLP receiver gets it.

The client's CLIENT span (the SDK's, kept in memory here), the gateway's SERVER span under it (from the
request's `_meta`), the gateway's CLIENT span under that, and the backend's own SERVER span under the
gateway's (the backend exports it itself): one trace, in both eras, to an HTTP and to a stdio backend, and
with the gateway serving over HTTP or over stdio.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from backend_fixtures import REPO_ROOT, RunningBackend
from conftest import JWT_SECRET, StartGateway, http_backend_config, make_token
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import ElicitResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracing.collector import Collector, Received
from tracing.helpers import GATEWAY, one, sdk_client, stdio_traced, traced_config

pytestmark = pytest.mark.timeout(120)


async def chain(received: Collector, client_spans: InMemorySpanExporter, exposed: str, original: str
                ) -> tuple[Received, Received, Received]:
    """The gateway's SERVER and CLIENT spans and the backend's SERVER span of one tools/call, checked as one trace."""
    def spans() -> tuple[list[Received], ...] | None:  # each exporter sends in its own time
        found = (received.find("sdk-backend", f"tools/call {original}"),
                 received.find(GATEWAY, f"tools/call {exposed}"), received.find(GATEWAY, f"tools/call {original}"))
        return found if all(found) else None

    backend, servers, clients = await received.wait_for(spans)
    server, client = one(servers), one(clients)
    sent = [s for s in client_spans.get_finished_spans() if s.name == f"MCP send tools/call {exposed}"]
    assert len(sent) == 1
    origin = sent[0].get_span_context()
    assert server.trace_id == client.trace_id == one(backend).trace_id == f"{origin.trace_id:032x}"
    assert server.parent_id == f"{origin.span_id:016x}"  # the SDK client's span, from _meta
    assert client.parent_id == server.span_id and one(backend).parent_id == client.span_id
    assert (server.kind, client.kind, one(backend).kind) == ("server", "client", "server")
    return server, client, one(backend)


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # 2025-11-25 with a session; 2026-07-28 without
async def test_one_trace_from_the_sdk_client_through_the_gateway_into_an_http_backend(
        mode: str, gateway: StartGateway, collector: tuple[Collector, str], traced_backend: RunningBackend,
        client_spans: InMemorySpanExporter) -> None:
    received, url = collector
    running = await gateway(traced_config(url, [http_backend_config("traced", traced_backend.url)]))
    async with sdk_client(running.url, make_token("acme"), mode=mode) as client:
        result = await client.call_tool("traced__echo", {"text": "hi"})
        assert result.content[0].text == "hi"  # type: ignore[union-attr]
    server, client_span, _ = await chain(received, client_spans, "traced__echo", "echo")
    modern = mode == "auto"
    assert server.attributes["mcp.protocol.version"] == ("2026-07-28" if modern else "2025-11-25")
    assert ("mcp.session.id" in server.attributes) is not modern  # sessions only, never at 2026-07-28
    assert server.attributes["mcp.method.name"] == "tools/call"
    assert server.attributes["gen_ai.tool.name"] == "traced__echo"
    assert server.attributes["gen_ai.operation.name"] == "execute_tool"
    assert server.attributes["network.transport"] == "tcp" and server.attributes["network.protocol.name"] == "http"
    assert server.attributes["client.address"] == "127.0.0.1" and "jsonrpc.request.id" in server.attributes
    assert server.attributes["mcpgw.tenant"] == "acme" and server.attributes["mcpgw.backend"] == "traced"
    assert server.attributes["mcpgw.policy.decision"] == "allowed" and server.attributes["mcpgw.outcome"] == "ok"
    assert "mcpgw.subject" not in server.attributes  # not without tracing.record_subject
    assert client_span.attributes["gen_ai.tool.name"] == "echo"
    assert client_span.attributes["mcpgw.tool.original"] == "echo"
    assert client_span.attributes["server.address"] == "127.0.0.1"
    assert client_span.attributes["server.port"] == traced_backend.port
    assert client_span.attributes["network.transport"] == "tcp"
    assert client_span.attributes["mcpgw.circuit.state"] == "closed"
    assert server.status == client_span.status == "unset"


async def test_one_trace_into_a_stdio_backend_carried_by_meta_alone(
        gateway: StartGateway, collector: tuple[Collector, str], client_spans: InMemorySpanExporter) -> None:
    received, url = collector
    running = await gateway(traced_config(url, [stdio_traced(url)]))
    async with sdk_client(running.url, make_token("acme")) as client:
        await client.call_tool("traced__echo", {"text": "hi"})
    _, client_span, _ = await chain(received, client_spans, "traced__echo", "echo")
    assert client_span.attributes["network.transport"] == "pipe"
    assert "server.address" not in client_span.attributes


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_one_trace_through_the_gateway_serving_stdio(
        mode: str, tmp_path: Path, collector: tuple[Collector, str], client_spans: InMemorySpanExporter) -> None:
    """`mcp-gateway stdio` (a client's own subprocess) traces too: its SERVER span names the pipe."""
    received, url = collector
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"auth": {"jwt": {"secret": JWT_SECRET}}, "backends": [stdio_traced(url)],
                                      "tenants": {"acme": {"backends": ["*"]}}, "logging": {"level": "warning"},
                                      "tracing": {"enabled": True, "endpoint": url}}))
    gateway = StdioServerParameters(command=sys.executable, args=["-m", "gateway", "stdio", "--config", str(config)],
                                    env={"MCP_GATEWAY_TOKEN": make_token("acme"), "PATH": os.environ["PATH"],
                                         "OTEL_BSP_SCHEDULE_DELAY": "50"}, cwd=REPO_ROOT)
    async with Client(gateway, mode=mode, read_timeout_seconds=30) as client:  # type: ignore[arg-type]
        assert (await client.call_tool("traced__echo", {"text": "hi"})).content[0].text == "hi"  # type: ignore[union-attr]
    server, client_span, _ = await chain(received, client_spans, "traced__echo", "echo")
    assert server.attributes["network.transport"] == "pipe"
    assert server.attributes["mcp.protocol.version"] == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert server.attributes["mcpgw.tenant"] == "acme" and client_span.attributes["network.transport"] == "pipe"


async def test_each_method_gets_its_conventions_attributes(
        gateway: StartGateway, collector: tuple[Collector, str], traced_backend: RunningBackend) -> None:
    received, url = collector
    running = await gateway(traced_config(url, [http_backend_config("traced", traced_backend.url)]))
    async with sdk_client(running.url, make_token("acme")) as client:
        await client.list_tools()
        await client.get_prompt("traced__greet", {"name": "Ada"})
        await client.read_resource("traced+traced://note")
        refused = await client.call_tool("traced__refuse", {"reason": "no"})
        assert refused.is_error
        with pytest.raises(Exception, match="Unknown tool"):
            await client.call_tool("traced__missing", {})
    await received.wait_for(lambda: received.find("sdk-backend", "tools/call refuse")
                            and received.find(GATEWAY, "tools/call traced__refuse"))
    listed = one([span for span in received.find(GATEWAY, "tools/list") if span.kind == "server"])
    assert "gen_ai.tool.name" not in listed.attributes
    assert "gen_ai.operation.name" not in listed.attributes  # execute_tool is for tools/call only
    prompt = one(received.find(GATEWAY, "prompts/get traced__greet"))
    assert prompt.attributes["gen_ai.prompt.name"] == "traced__greet"
    assert "gen_ai.prompt.variable.name" not in prompt.attributes  # content is opt-in
    assert one(received.find(GATEWAY, "prompts/get greet", **{"gen_ai.prompt.name": "greet"})).kind == "client"
    read = one(received.find(GATEWAY, "resources/read", **{"mcp.resource.uri": "traced+traced://note"}))
    assert read.kind == "server"
    assert one(received.find(GATEWAY, "resources/read", **{"mcp.resource.uri": "traced://note"})).kind == "client"
    for name in ("tools/call traced__refuse", "tools/call refuse"):  # an isError result fails both spans
        span = one(received.find(GATEWAY, name))
        assert span.attributes["error.type"] == "tool_error" and span.status == "error"
    missing = one(await received.wait_for(
        lambda: received.find(GATEWAY, "tools/call", **{"gen_ai.tool.name": "traced__missing"})))
    assert missing.attributes["rpc.response.status_code"] == "-32602"  # the caller's mistake: no failure
    assert "error.type" not in missing.attributes and missing.status == "unset"
    assert missing.attributes["mcpgw.policy.decision"] == "not_visible"


async def test_a_catalogue_refresh_is_a_trace_of_its_own_with_its_list_requests_in_it(
        gateway: StartGateway, collector: tuple[Collector, str], traced_backend: RunningBackend) -> None:
    received, url = collector
    await gateway(traced_config(url, [http_backend_config("traced", traced_backend.url)]))
    refresh = one(await received.wait_for(lambda: received.find(GATEWAY, "mcpgw catalogue refresh")))
    assert refresh.parent_id == "" and refresh.attributes["mcpgw.backend"] == "traced"
    assert refresh.attributes["mcpgw.catalogue.items"] == 5  # three tools, a prompt, a resource
    pages = [span for span in received.find(GATEWAY) if span.parent_id == refresh.span_id]
    assert {span.name for span in pages} >= {"tools/list", "prompts/list", "resources/list"}
    assert all(span.kind == "client" for span in pages)
    listed = await received.wait_for(lambda: received.find("sdk-backend", "tools/list"))
    assert any(span.parent_id in {page.span_id for page in pages} for span in listed)  # the backend's, under ours


async def test_a_backends_question_to_the_client_is_served_and_sent_on_in_the_same_trace(
        gateway: StartGateway, collector: tuple[Collector, str], traced_backend: RunningBackend) -> None:
    received, url = collector
    running = await gateway(traced_config(url, [http_backend_config("traced", traced_backend.url)]))

    async def accept(context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="accept", content={"confirm": True})

    async with sdk_client(running.url, make_token("acme"), elicitation_callback=accept) as client:
        assert (await client.call_tool("traced__confirm", {"action": "go"})).content[0].text == "accept"  # type: ignore[union-attr]
    asked = one(await received.wait_for(lambda: received.find("sdk-backend", "MCP send elicitation/create")))

    def gateways() -> tuple[list[Received], ...] | None:
        asked = received.find(GATEWAY, "elicitation/create")
        found = ([s for s in asked if s.kind == "server"], [s for s in asked if s.kind == "client"],
                 received.find(GATEWAY, "tools/call confirm"))
        return found if all(found) else None

    served, sent, call = (one(spans) for spans in await received.wait_for(gateways))
    assert served.parent_id == asked.span_id and asked.parent_id != ""  # the backend's own request span
    assert served.links == (call.span_id,) and sent.parent_id == served.span_id
    assert served.trace_id == sent.trace_id == call.trace_id
    assert served.attributes["mcpgw.outcome"] == "ok" and sent.status == "unset"
