"""Where spans go and what they carry: parent and link from the two carriers, sampling, gRPC, opt-in
content, and a gateway that serves on while its collector is down or slow."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from typing import Any

import pytest
from aiohttp import web
from backend_fixtures import RunningBackend, free_port, recording_backend
from conftest import SCRAPE_TOKEN, RawClient, StartGateway, http_backend_config, make_token

from tracing.collector import Collector, grpc_server
from tracing.helpers import GATEWAY, one, traced_config

pytestmark = pytest.mark.timeout(120)

META_PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
HEADER_PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def recorder(seen: list[tuple[str, str]]) -> web.Application:
    """A backend of one tool that records each call's trace context (header, `_meta`)."""

    def call(request: web.Request, params: dict[str, Any]) -> dict[str, Any]:
        seen.append((request.headers["traceparent"], params["_meta"]["traceparent"]))
        return {"content": [{"type": "text", "text": str(params["arguments"].get("text"))}]}

    return recording_backend(call)


async def _call(client: RawClient, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None,
                **headers: str) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    status, body, _ = await client.post(client.request("tools/call", params), **headers)
    assert status == 200, body
    return dict(body)


async def test_the_meta_context_is_the_parent_and_the_header_context_a_link(
        gateway: StartGateway, raw_client: Any, collector: tuple[Collector, str],
        traced_backend: RunningBackend) -> None:
    received, url = collector
    running = await gateway(traced_config(url, [http_backend_config("traced", traced_backend.url)]))
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    await _call(client, "traced__echo", {"text": "a"}, {"traceparent": META_PARENT}, traceparent=HEADER_PARENT)
    await _call(client, "traced__echo", {"text": "b"}, traceparent=HEADER_PARENT)
    spans = await received.wait_for(lambda: len(received.find(GATEWAY, "tools/call traced__echo")) == 2
                                    and received.find(GATEWAY, "tools/call traced__echo"))
    by_trace = {span.trace_id: span for span in spans}
    with_meta, header_only = by_trace[META_PARENT[3:35]], by_trace[HEADER_PARENT[3:35]]
    assert with_meta.parent_id == META_PARENT[36:52] and with_meta.links == (HEADER_PARENT[36:52],)
    assert header_only.parent_id == HEADER_PARENT[36:52] and header_only.links == ()


async def test_at_ratio_zero_nothing_is_recorded_and_the_backend_hears_an_unsampled_context(
        gateway: StartGateway, raw_client: Any, collector: tuple[Collector, str], aiohttp_server: Any) -> None:
    received, url = collector
    seen: list[tuple[str, str]] = []
    backend = await aiohttp_server(recorder(seen))
    config = traced_config(url, [http_backend_config("rec", str(backend.make_url("/mcp")))],
                           sampler="parentbased_traceidratio", ratio=0.0)
    running = await gateway(config)
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    await _call(client, "rec__echo", {})
    header, meta = seen[-1]
    assert header == meta and int(header[-2:], 16) & 1 == 0  # one context, not sampled: nobody records it
    await asyncio.sleep(0.5)
    assert received.find(GATEWAY, "tools/call rec__echo") == []
    await _call(client, "rec__echo", {}, traceparent=HEADER_PARENT)  # a sampled parent: parent-based keeps it
    await received.wait_for(lambda: received.find(GATEWAY, "tools/call rec__echo"))


async def test_spans_go_over_grpc_too(gateway: StartGateway, raw_client: Any, aiohttp_server: Any) -> None:
    received = Collector()
    server, port = await grpc_server(received)
    try:
        config = traced_config(f"http://127.0.0.1:{port}", [], protocol="grpc", service_name="gw-grpc",
                               resource_attributes={"deployment.environment": "test"})
        running = await gateway(config)
        client: RawClient = raw_client(running.url, make_token("acme"))
        await client.initialize()
        spans = await received.wait_for(lambda: received.find("gw-grpc", "initialize"))
        assert spans[0].kind == "server" and spans[0].attributes["mcp.method.name"] == "initialize"
    finally:
        await server.stop(None)


async def test_arguments_and_results_only_when_asked_and_secrets_redacted(
        gateway: StartGateway, raw_client: Any, collector: tuple[Collector, str],
        traced_backend: RunningBackend) -> None:
    received, url = collector
    config = traced_config(url, [http_backend_config("traced", traced_backend.url)], capture_arguments=True,
                           capture_results=True, record_subject=True)
    running = await gateway(config)
    client: RawClient = raw_client(running.url, make_token("acme", sub="ada"))
    await client.initialize()
    status, _, _ = await client.post(client.request("tools/call", {"name": "traced__echo", "arguments": {
        "text": "hello", "api_token": "s3cr3t"}}))
    assert status == 200
    server = one(await received.wait_for(lambda: received.find(GATEWAY, "tools/call traced__echo")))
    arguments = server.attributes["gen_ai.tool.call.arguments"]
    assert '"text":"hello"' in arguments and "s3cr3t" not in arguments and "[redacted]" in arguments
    assert "hello" in server.attributes["gen_ai.tool.call.result"]
    assert server.attributes["mcpgw.subject"] == "ada"


async def _metric(running: Any, name: str) -> float:
    import aiohttp
    async with aiohttp.ClientSession() as session, session.get(
            running.base + "metrics", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"}) as response:
        text = await response.text()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


@pytest.mark.parametrize("collector_state", ["down", "slow"])
async def test_the_gateway_serves_on_while_its_collector_is_down_or_slow(
        collector_state: str, gateway: StartGateway, raw_client: Any, collector: tuple[Collector, str],
        aiohttp_server: Any) -> None:
    received, url = collector
    backend = await aiohttp_server(recorder([]))
    if collector_state == "down":
        url = f"http://127.0.0.1:{free_port()}"  # nobody listens
    else:
        received.delay = 3.0
    config = traced_config(url, [http_backend_config("rec", str(backend.make_url("/mcp")))], max_queue_size=4,
                           timeout_seconds=2)
    running = await gateway(config)
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    started = time.monotonic()
    for n in range(30):
        reply = await _call(client, "rec__echo", {"text": str(n)})
        assert reply["result"]["content"][0]["text"] == str(n)
    assert time.monotonic() - started < 15  # about 0.1 s a call here; a blocked loop would take seconds each
    dropped = await _metric(running, 'mcpgw_trace_spans_dropped_total{reason="queue_full"}')
    assert dropped > 0  # 30 requests make 60+ spans; at most 4 wait, and an export takes seconds


def test_without_the_otel_extra_the_gateway_serves_while_tracing_is_off() -> None:
    """OpenTelemetry made unimportable (as without the extra): the gateway imports, starts and answers, and
    its tracing section says what to install when it is turned on."""
    script = """
import asyncio, importlib.abc, sys

class NoOpenTelemetry(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoOpenTelemetry())
import aiohttp
from aiohttp.test_utils import TestServer
from gateway.app import create_app
from gateway.config import parse_config
from gateway.tracing import TracingUnavailable, open_tracing

async def main():
    config = parse_config({"auth": {"anonymous_tenant": "acme"}, "tenants": {"acme": {"backends": ["*"]}},
                           "server": {"ready_requires": "none"}}, {})
    async with TestServer(create_app(config)) as server, aiohttp.ClientSession() as session:
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        async with session.post(server.make_url("/mcp"), json=body,
                                headers={"Accept": "application/json, text/event-stream"}) as response:
            assert response.status == 200, await response.text()
    try:
        open_tracing(parse_config({"tracing": {"enabled": True}}, {}).tracing, on_dropped=print, on_exported=print)
    except TracingUnavailable as exc:
        assert "mcp-gateway[otel]" in str(exc), exc
    else:
        raise AssertionError("tracing opened without OpenTelemetry")
    assert not [m for m in sys.modules if m.startswith("opentelemetry")]

asyncio.run(main())
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
