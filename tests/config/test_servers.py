"""The `servers` section: virtual servers are read into frozen objects, and every mistake is a config
error naming its key path."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import ConfigError, parse_config

BACKENDS = [{"name": "crm", "transport": "stdio", "command": ["x"]}, {"name": "git", "transport": "stdio",
                                                                       "command": ["x"]}]


def config(server: dict[str, Any], name: str = "data") -> Any:
    return parse_config({"backends": BACKENDS, "tenants": {"acme": {}}, "servers": {name: server}}, {})


def test_a_server_is_read_with_its_items_named_by_backend_and_own_name() -> None:
    server = config({"tenants": ["acme"], "instructions": "Hi.", "tools": [
        {"backend": "crm", "tool": "refund", "name": "small_refund", "fixed": {"reason": "x", "limit": 5}},
        {"backend": "git", "tool": "push"}], "prompts": [{"backend": "crm", "prompt": "summary"}]}).servers["data"]
    assert server.instructions == "Hi." and server.admits("acme") and not server.admits("ops")
    assert [(t.backend, t.tool, t.name, dict(t.fixed)) for t in server.tools] == [
        ("crm", "refund", "small_refund", {"reason": "x", "limit": 5}), ("git", "push", "push", {})]
    assert server.tools[1].where == "servers.data.tools[1]"
    assert server.prompts[0].name == "summary"


@pytest.mark.parametrize(("server", "name", "error"), [
    ({"tenants": ["acme"], "tools": [{"backend": "crm", "tool": "a", "name": "x"}, {"backend": "git", "tool": "x"}]},
     "data", "servers.data.tools[1].name: 'x' is listed by servers.data.tools[0] too"),
    ({"tenants": ["acme"], "prompts": [{"backend": "crm", "prompt": "p"}, {"backend": "git", "prompt": "p"}]},
     "data", "servers.data.prompts[1].name: 'p' is listed by servers.data.prompts[0] too"),
    ({"tenants": ["acme"], "tools": [{"backend": "nope", "tool": "a"}]}, "data",
     "servers.data.tools[0].backend: unknown backend 'nope'"),
    ({"tenants": ["acme", "ghost"]}, "data", "servers.data.tenants[1]: unknown tenant 'ghost'"),
    ({}, "data", "servers.data.tenants: required"),
    ({"tenants": ["acme"], "tools": [{"backend": "crm"}]}, "data", "servers.data.tools[0].tool: required"),
    ({"tenants": ["acme"], "tools": [{"backend": "crm", "tool": "a", "name": "bad name"}]}, "data",
     "servers.data.tools[0].name: 'bad name' is not a valid MCP name"),
    ({"tenants": ["acme"], "tools": [{"backend": "crm", "tool": "a", "fixed": ["x"]}]}, "data",
     "servers.data.tools[0].fixed: must be a mapping"),
    ({"tenants": ["acme"], "tools": [{"backend": "crm", "tool": "a", "renamed": "b"}]}, "data",
     "servers.data.tools[0].renamed: unknown key"),
    ({"tenants": ["acme"]}, "Data_Team", "servers.Data_Team: a server name must match"),
])
def test_a_bad_server_is_a_config_error_with_its_key_path(server: dict[str, Any], name: str, error: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config(server, name)
    assert str(raised.value).startswith(error)
