"""The exchange core over stdio: lines in, lines out, the stdout channel and the client's answers on stdin."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from conftest import make_config

from gateway.components import build_components
from gateway.transport.exchange import Exchange
from gateway.transport.stdio.connection import StdioClient

pytestmark = pytest.mark.timeout(30)


class Pipe:
    """The client's side: what the gateway wrote to stdout, one decoded message per line."""

    def __init__(self) -> None:
        self.lines: list[Any] = []
        self.arrived = asyncio.Event()

    def write(self, data: bytes) -> None:
        assert data.endswith(b"\n") and data.count(b"\n") == 1
        self.lines.append(orjson.loads(data))
        self.arrived.set()

    async def next(self) -> Any:
        while not self.lines:
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), 5)
        return self.lines.pop(0)


@pytest.fixture
async def stdio() -> AsyncIterator[tuple[StdioClient, Pipe]]:
    config = make_config([], auth={"anonymous_tenant": "acme"})
    core = build_components(config, list_changed=True)
    core.catalogue.ready.set()  # no backends to list: what start() does after its first build
    exchange = Exchange(dispatcher=core.dispatcher, authenticator=core.authenticator, tenants=config.tenants)
    pipe = Pipe()
    client = StdioClient(exchange=exchange, tenant=config.tenants["acme"], token=None, write=pipe.write)
    serving = asyncio.create_task(client.serve(grace=1))
    yield client, pipe
    client.eof()
    await serving
    await core.authenticator.close()


def feed(client: StdioClient, *messages: Any) -> None:
    for message in messages:
        client.feed(orjson.dumps(message))


async def test_a_request_gets_its_reply_on_stdout(stdio: tuple[StdioClient, Pipe]) -> None:
    client, pipe = stdio
    feed(client, {"jsonrpc": "2.0", "id": 7, "method": "ping"})
    assert await pipe.next() == {"jsonrpc": "2.0", "id": 7, "result": {}}


async def test_the_gateway_asks_the_client_on_stdout_and_its_answer_on_stdin_comes_back(
        stdio: tuple[StdioClient, Pipe]) -> None:
    client, pipe = stdio
    asking = asyncio.create_task(client.channel.ask("roots/list", None, timeout=5))
    request = await pipe.next()
    assert request["method"] == "roots/list"
    feed(client, {"jsonrpc": "2.0", "id": request["id"], "result": {"roots": [{"uri": "file:///w"}]}})
    assert (await asking)["result"]["roots"] == [{"uri": "file:///w"}]
    assert pipe.lines == []  # a response gets no reply


async def test_bad_lines_get_json_rpc_errors_and_the_client_keeps_going(stdio: tuple[StdioClient, Pipe]) -> None:
    client, pipe = stdio
    client.feed(b"{not json")
    assert (await pipe.next())["error"]["code"] == -32700
    feed(client, {"jsonrpc": "2.0", "id": 3, "method": 5})
    error = await pipe.next()
    assert error["id"] == 3 and error["error"]["code"] == -32600
    feed(client, {"jsonrpc": "2.0", "id": 4, "method": "no/such"})
    assert (await pipe.next())["error"]["code"] == -32601


async def test_a_batch_is_refused_until_2025_03_26_is_negotiated_and_then_answered(
        stdio: tuple[StdioClient, Pipe]) -> None:
    client, pipe = stdio
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    feed(client, batch)
    assert (await pipe.next())["error"]["code"] == -32600
    assert not client.initialized  # a refused batch is not read
    feed(client, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert (await pipe.next())["result"]["protocolVersion"] == "2025-03-26"
    feed(client, batch)
    assert await pipe.next() == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    assert client.initialized


async def test_list_changed_reaches_the_client_only_once_it_is_initialized(stdio: tuple[StdioClient, Pipe]) -> None:
    client, pipe = stdio
    note = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    client.deliver({"acme"}, note)
    feed(client, {"jsonrpc": "2.0", "method": "notifications/initialized"},
         {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert (await pipe.next())["id"] == 1  # nothing was sent before initialized
    client.deliver({"globex"}, note)
    client.deliver({"acme"}, note)
    assert await pipe.next() == note
    assert pipe.lines == []
