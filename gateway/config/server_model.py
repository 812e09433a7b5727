"""The `servers` section's types: virtual servers, each a curated endpoint of its own.

A virtual server (`/servers/<name>/mcp`) serves a chosen set of tools and prompts taken from any
backends, each named by its backend and the backend's own name (never by an exposed name, which a
new backend or a new order may change), optionally renamed, retitled, redescribed, and for tools
with arguments fixed to a value. Builder: gateway.config.servers; serving: gateway.catalogue.servers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True, eq=True)
class ServedTool:
    """One tool of a virtual server."""

    backend: str
    tool: str  # the backend's own name
    name: str = ""  # what the server lists it as (empty: `tool`)
    title: str | None = None
    description: str | None = None
    fixed: Mapping[str, Any] = field(default_factory=dict)  # hidden from the schema, injected into each call
    where: str = ""  # its key path (logs, the admin view)


@dataclass(frozen=True, slots=True, eq=True)
class ServedPrompt:
    """One prompt of a virtual server."""

    backend: str
    prompt: str  # the backend's own name
    name: str = ""  # what the server lists it as (empty: `prompt`)
    title: str | None = None
    description: str | None = None
    where: str = ""


@dataclass(frozen=True, slots=True, eq=True)
class VirtualServer:
    name: str
    tenants: tuple[str, ...] = ()  # who may use it: tenant names, or "*"
    title: str | None = None
    instructions: str | None = None  # what initialize and server/discover say to its clients
    tools: tuple[ServedTool, ...] = ()
    prompts: tuple[ServedPrompt, ...] = ()

    def admits(self, tenant: str) -> bool:
        return "*" in self.tenants or tenant in self.tenants
