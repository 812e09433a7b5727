"""Hostile 2026-07-28 requests on the gateway's own stdio transport (`mcp-gateway stdio`, a local client).

On a 2026 connection, random requests, each part mostly right and broken anywhere
(reliability.strategies.modern_requests, without the HTTP headers stdio has none of): each gets
exactly one clean JSON-RPC answer with its own id, stdout carries nothing but JSON-RPC, and the
process serves a well-formed call right after.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from lifecycle.processes import gateway_config
from lifecycle.test_stdio_mode import StdioGateway

from reliability.served import LEAKS
from reliability.strategies import MODERN, modern_requests

pytestmark = pytest.mark.timeout(300)

ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
ids = itertools.count(1000)


@pytest.fixture(scope="module")
def stdio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioGateway]:
    """A 2026 connection (its first request carries the envelope), healthy after the examples."""
    gateway = StdioGateway(gateway_config(Path(tmp_path_factory.mktemp("stdio")), port=0))
    try:
        gateway.send({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": ENVELOPE}})
        assert MODERN in gateway.reply_to(1)["result"]["supportedVersions"]
        yield gateway
        add = {"name": "calc__add", "arguments": {"a": 2, "b": 3}, "_meta": ENVELOPE}
        gateway.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": add})
        assert gateway.reply_to(2)["result"]["structuredContent"] == {"result": 5.0}
        assert gateway.process.poll() is None
    finally:
        gateway.kill()


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(request=modern_requests())
def test_random_2026_requests_on_stdio_get_one_clean_answer_each(
        stdio: StdioGateway, request: tuple[Any, dict[str, str]]) -> None:
    message, _ = request
    request_id = next(ids)
    stdio.send({**message, "id": request_id})  # an id of our own: the answer must carry it
    reply = stdio.reply_to(request_id)
    assert reply["jsonrpc"] == "2.0" and ("result" in reply) != ("error" in reply), reply
    line = stdio.lines[-1]
    assert not any(leak in line for leak in LEAKS), line[:500]
    if "error" in reply:
        assert isinstance(reply["error"]["code"], int) and len(reply["error"]["message"]) < 300, reply
        assert reply["error"]["message"] != "Internal error", reply
    event(f"stdio 2026: {reply['error']['code'] if 'error' in reply else 'a result'}")
