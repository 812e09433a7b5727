"""The `servers` section: virtual servers (types and meaning: gateway.config.server_model).

Every name a server lists comes from the config alone, so it cannot change when backends are
added or reordered; two items listed under one name are a config error naming both key paths.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gateway.config.reader import ConfigError, Section, mapping, read
from gateway.config.server_model import ServedPrompt, ServedResource, ServedTemplate, ServedTool, VirtualServer
from gateway.protocol.spec import TOOL_NAME

SERVER_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
"""A server's name is a path segment: `/servers/<name>/mcp`."""


def servers_section(root: Section) -> dict[str, VirtualServer]:
    root.seen.add("servers")
    raw = mapping(root.data.get("servers"), "servers")
    servers = {}
    for name, body in raw.items():
        where = f"servers.{name}"
        if not isinstance(name, str) or not SERVER_NAME.fullmatch(name):
            raise ConfigError(f"{where}: a server name must match {SERVER_NAME.pattern}")
        servers[name] = read(Section(body, where, VirtualServer), _server(name))
    return servers


def check_servers(servers: dict[str, VirtualServer], backends: set[str], tenants: set[str]) -> None:
    """Every backend and tenant a server names must exist."""
    for server in servers.values():
        for i, tenant in enumerate(server.tenants):
            if tenant != "*" and tenant not in tenants:
                raise ConfigError(f"servers.{server.name}.tenants[{i}]: unknown tenant {tenant!r}")
        for item in (*server.tools, *server.prompts, *server.resources, *server.templates):
            if item.backend not in backends:
                raise ConfigError(f"{item.where}.backend: unknown backend {item.backend!r}")


def _server(name: str) -> Callable[[Section], VirtualServer]:
    def build(s: Section) -> VirtualServer:
        tenants = s.strings("tenants")
        if not tenants:
            raise ConfigError(f"{s.where('tenants')}: required (tenant names, or \"*\")")
        tools = tuple(read(item, _tool) for item in s.items("tools", ServedTool))
        prompts = tuple(read(item, _prompt) for item in s.items("prompts", ServedPrompt))
        resources = tuple(read(item, _resource) for item in s.items("resources", ServedResource))
        templates = tuple(read(item, _template) for item in s.items("templates", ServedTemplate))
        _check_unique(tools, "tools")
        _check_unique(prompts, "prompts")
        _check_unique(resources, "resources")
        _check_unique(templates, "templates")
        return VirtualServer(name=name, tenants=tenants, title=s.get("title", str),
                             instructions=s.get("instructions", str), tools=tools, prompts=prompts,
                             resources=resources, templates=templates)

    return build


def _tool(s: Section) -> ServedTool:
    own = s.required("tool", str)
    return ServedTool(backend=s.required("backend", str), tool=own, name=_name(s, own), title=s.get("title", str),
                      description=s.get("description", str), fixed=_fixed(s), where=s.path)


def _prompt(s: Section) -> ServedPrompt:
    own = s.required("prompt", str)
    fixed = _fixed(s)
    for key, value in fixed.items():
        if not isinstance(value, str):
            raise ConfigError(f"{s.where('fixed')}.{key}: a prompt's arguments are strings")
    return ServedPrompt(backend=s.required("backend", str), prompt=own, name=_name(s, own), title=s.get("title", str),
                        description=s.get("description", str), fixed=fixed, where=s.path)


def _resource(s: Section) -> ServedResource:
    return ServedResource(backend=s.required("backend", str), uri=_source(s, "uri"), title=s.get("title", str),
                          description=s.get("description", str), where=s.path)


def _template(s: Section) -> ServedTemplate:
    return ServedTemplate(backend=s.required("backend", str), template=_source(s, "template"),
                          title=s.get("title", str), description=s.get("description", str), where=s.path)


def _source(s: Section, key: str) -> str:
    value = s.required(key, str)
    if not value:
        raise ConfigError(f"{s.where(key)}: must not be empty")
    return str(value)


def _name(s: Section, own: str) -> str:
    name = s.get("name", str) or own
    if not TOOL_NAME.fullmatch(name):
        key = "name" if "name" in s.data else next(k for k in ("tool", "prompt") if k in s.data)
        raise ConfigError(f"{s.where(key)}: {name!r} is not a valid MCP name ([A-Za-z0-9_.-], 1 to 64 characters); "
                          "give it a `name`")
    return str(name)


def _fixed(s: Section) -> dict[str, Any]:
    s.seen.add("fixed")
    raw = mapping(s.data.get("fixed"), s.where("fixed"))
    return {str(key): value for key, value in raw.items()}


def _check_unique(items: tuple[ServedTool | ServedPrompt | ServedResource | ServedTemplate, ...], kind: str) -> None:
    seen: dict[str, str] = {}
    for item in items:
        if item.name in seen:
            if isinstance(item, ServedResource | ServedTemplate):
                key = "uri" if kind == "resources" else "template"
                raise ConfigError(f"{item.where}.{key}: {item.source!r} of {item.backend} is listed by "
                                  f"{seen[item.name]} too")
            raise ConfigError(f"{item.where}.name: {item.name!r} is listed by {seen[item.name]} too "
                              f"(names within one server's {kind} must differ)")
        seen[item.name] = item.where
