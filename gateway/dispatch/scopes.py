"""Which OAuth scopes a request needs, so a token without them is refused and its client steps up.

Every MCP request needs `auth.required_scopes` and its tenant's `required_scopes`; a request that
reaches a backend (tools/call, prompts/get, resources/read) needs that backend's as well, and a
tools/call the scopes of every `auth.tool_scopes` glob matching the exposed tool name. Lists are
not filtered by scope: a client sees the tool, calls it, and is told which scope to ask for
(403 `insufficient_scope`, MCP authorization §Scope Challenge Handling). The HTTP endpoint asks
before it answers (an HTTP 403 with the challenge); the dispatcher asks again for what does not
come that way (batch members, stdio), and refuses those with a JSON-RPC error naming the scopes.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from gateway.catalogue.listings import PROMPTS
from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.servers import served
from gateway.config import Config, TenantConfig
from gateway.config.server_model import VirtualServer
from gateway.protocol import spec
from gateway.protocol.errors import InsufficientScope, InvalidParams
from gateway.tenancy import Principal

NONE: frozenset[str] = frozenset()


class ScopeRules:
    """The scopes each request needs, from the config (see the module docstring)."""

    def __init__(self, config: Config, catalogue: CatalogueService) -> None:
        self.catalogue = catalogue
        self.everywhere = frozenset(config.auth.required_scopes)
        self.backends: Mapping[str, frozenset[str]] = {
            backend.name: frozenset(backend.required_scopes) for backend in config.backends if backend.required_scopes}
        self.tools = tuple((glob, frozenset(scopes)) for glob, scopes in config.auth.tool_scopes.items())
        self.enabled = bool(self.everywhere or self.backends or self.tools
                            or any(tenant.required_scopes for tenant in config.tenants.values()))

    def check(self, principal: Principal, tenant: TenantConfig, method: str | None, params: Any,
              server: VirtualServer | None = None) -> None:
        """InsufficientScope (403) naming what is needed, unless the principal holds all of it."""
        needed = self.needed(principal, tenant, method, params, server)
        if not needed <= principal.scopes:
            raise InsufficientScope(needed)

    def needed(self, principal: Principal, tenant: TenantConfig, method: str | None, params: Any,
               server: VirtualServer | None = None) -> frozenset[str]:
        needed = self.everywhere | frozenset(tenant.required_scopes)
        backend, tool = self._target(principal, tenant, method, params if isinstance(params, dict) else {}, server)
        if backend is not None:
            needed |= self.backends.get(backend, NONE)
        if tool is not None:
            for glob, scopes in self.tools:
                if fnmatchcase(tool, glob):
                    needed |= scopes
        return needed

    def _target(self, principal: Principal, tenant: TenantConfig, method: str | None,
                params: dict[str, Any], server: VirtualServer | None) -> tuple[str | None, str | None]:
        """The backend (and exposed tool) a request reaches; (None, None) for the gateway's own methods.
        A name the caller cannot see is left to the method itself to refuse (it says so the same way).
        Through a virtual server, its source's: a renamed tool needs the scopes of the tool it is."""
        view = self.catalogue.view(tenant, principal)
        try:
            if server is not None and method == spec.TOOLS_CALL:
                entry = served(view, server).lookup(params.get("name")).entry
                return entry.backend, entry.exposed
            if server is not None and method == spec.PROMPTS_GET:
                return served(view, server).prompt(params.get("name"))[1].backend, None
            if method == spec.TOOLS_CALL:
                entry = view.lookup(params.get("name"))
                return entry.backend, entry.exposed
            if method == spec.PROMPTS_GET:
                return view.listing(PROMPTS).lookup(params.get("name")).backend, None
        except InvalidParams:
            return None, None
        if method == spec.RESOURCES_READ and isinstance(params.get("uri"), str):
            route = view.resolve_uri(params["uri"])
            return (route.backend if route is not None else None), None
        return None, None
