"""MCP Apps through the gateway: a tool's `_meta.ui.resourceUri` (and a result's) names the gateway URI of its
`ui://` resource, which reads through the gateway from the same backend; both eras, the official SDK client."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import RunningGateway, StartGateway, make_config
from test_parity_2026 import sdk  # the SDK client in either era, as tenant acme

pytestmark = pytest.mark.timeout(120)

SERVER = [sys.executable, str(Path(__file__).with_name("ui_app_server.py"))]


@pytest.fixture
async def running(gateway: StartGateway) -> RunningGateway:
    return await gateway(make_config([{"name": "apps", "transport": "stdio", "command": SERVER},
                                      {"name": "bare", "transport": "stdio", "command": SERVER, "namespace": ""}]))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_tools_ui_resource_uri_names_the_gateway_uri_that_reads_it(running: RunningGateway, mode: str) -> None:
    async with sdk(running, mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        meta = tools["apps__show_clock"].meta
        assert meta is not None
        assert meta["ui"] == {"resourceUri": "apps+ui://clock/app.html"}
        assert meta["ui/resourceUri"] == "apps+ui://clock/legacy.html"
        assert tools["apps__plain"].meta is None
        assert tools["show_clock"].meta is not None  # an unprefixed backend keeps its URIs as they are
        assert tools["show_clock"].meta["ui"] == {"resourceUri": "ui://clock/app.html"}
        read = await client.read_resource(meta["ui"]["resourceUri"])
        assert read.contents[0].text == "<html><body>clock</body></html>"  # type: ignore[union-attr]
        assert str(read.contents[0].uri) == "apps+ui://clock/app.html"
        result = await client.call_tool("apps__show_clock", {"zone": "UTC"})
    assert not result.is_error
    assert result.meta is not None and result.meta["ui"] == {"resourceUri": "apps+ui://clock/app.html"}
