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


def test_resources_and_templates_are_read_by_backend_and_own_uri_or_glob() -> None:
    server = config({"tenants": ["acme"], "resources": [
        {"backend": "crm", "uri": "orders://all", "title": "All orders"}, {"backend": "git", "uri": "repo://*"}],
        "templates": [{"backend": "crm", "template": "orders://{id}", "description": "One order."}],
        "prompts": [{"backend": "crm", "prompt": "summary", "fixed": {"tone": "short"}}]}).servers["data"]
    exact, glob = server.resources
    assert (exact.uri, exact.title, exact.glob, glob.glob) == ("orders://all", "All orders", False, True)
    assert exact.covers("crm", "orders://all") and not exact.covers("git", "orders://all")
    assert glob.covers("git", "repo://a/b") and not glob.covers("git", "orders://all")
    assert (server.templates[0].template, server.templates[0].where) == ("orders://{id}", "servers.data.templates[0]")
    assert dict(server.prompts[0].fixed) == {"tone": "short"}


@pytest.mark.parametrize(("server", "name", "error"), [
    ({"tenants": ["acme"], "resources": [{"backend": "nope", "uri": "a://b"}]}, "data",
     "servers.data.resources[0].backend: unknown backend 'nope'"),
    ({"tenants": ["acme"], "templates": [{"backend": "crm"}]}, "data", "servers.data.templates[0].template: required"),
    ({"tenants": ["acme"], "resources": [{"backend": "crm", "uri": ""}]}, "data",
     "servers.data.resources[0].uri: must not be empty"),
    ({"tenants": ["acme"], "resources": [{"backend": "crm", "uri": "a://b"}, {"backend": "crm", "uri": "a://b"}]},
     "data", "servers.data.resources[1].uri: 'a://b' of crm is listed by servers.data.resources[0] too"),
    ({"tenants": ["acme"], "templates": [{"backend": "crm", "template": "a://{x}", "name": "y"}]}, "data",
     "servers.data.templates[0].name: unknown key"),
    ({"tenants": ["acme"], "prompts": [{"backend": "crm", "prompt": "p", "fixed": {"n": 3}}]}, "data",
     "servers.data.prompts[0].fixed.n: a prompt's arguments are strings"),
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
