"""The `servers` section's types: virtual servers, each a curated endpoint of its own.

A virtual server (`/servers/<name>/mcp`) serves a chosen set of tools, prompts, resources and resource
templates taken from any backends, each named by its backend and the backend's own name or URI (never by
an exposed name, which a new backend or a new order may change), optionally retitled and redescribed;
tools and prompts may be renamed and have arguments fixed to a value. Resources keep their gateway URI
(`<namespace>+<uri>`, from the backend's config alone), so read contents and links need no rewriting.
Builder: gateway.config.servers; serving: gateway.catalogue.servers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
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
    fixed: Mapping[str, str] = field(default_factory=dict)  # hidden from the listed arguments, injected into each get
    where: str = ""


GLOB_CHARACTERS = frozenset("*?[")


class _BySource:
    """What resources and templates share: one backend's own URI (template), or a glob over them (`*`, `?`,
    `[...]`) that takes every matching one."""

    __slots__ = ()
    backend: str

    @property
    def source(self) -> str:
        raise NotImplementedError

    @property
    def name(self) -> str:
        """How logs and the admin view name it."""
        return f"{self.backend} {self.source}"

    @property
    def glob(self) -> bool:
        return not GLOB_CHARACTERS.isdisjoint(self.source)

    def covers(self, backend: str, original: str) -> bool:
        """Whether this item takes the backend's item `original` (its own URI or template)."""
        if backend != self.backend:
            return False
        return fnmatchcase(original, self.source) if self.glob else original == self.source


@dataclass(frozen=True, slots=True, eq=True)
class ServedResource(_BySource):
    """One resource of a virtual server (or, with a glob, every matching one of its backend)."""

    backend: str
    uri: str  # the backend's own URI, or a glob over them
    title: str | None = None
    description: str | None = None
    where: str = ""

    @property
    def source(self) -> str:
        return self.uri


@dataclass(frozen=True, slots=True, eq=True)
class ServedTemplate(_BySource):
    """One resource template of a virtual server (or, with a glob, every matching one of its backend)."""

    backend: str
    template: str  # the backend's own uriTemplate, or a glob over them
    title: str | None = None
    description: str | None = None
    where: str = ""

    @property
    def source(self) -> str:
        return self.template


@dataclass(frozen=True, slots=True, eq=True)
class VirtualServer:
    name: str
    tenants: tuple[str, ...] = ()  # who may use it: tenant names, or "*"
    title: str | None = None
    instructions: str | None = None  # what initialize and server/discover say to its clients
    tools: tuple[ServedTool, ...] = ()
    prompts: tuple[ServedPrompt, ...] = ()
    resources: tuple[ServedResource, ...] = ()
    templates: tuple[ServedTemplate, ...] = ()

    def admits(self, tenant: str) -> bool:
        return "*" in self.tenants or tenant in self.tenants
