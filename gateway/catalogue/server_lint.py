"""What `mcp-gateway check-config` says of virtual server items that load but can serve nobody.

Judged from the config alone (no backend is asked): an item whose backend none of the server's tenants
uses, or whose exposed name or gateway URI (what `/mcp` would call it: the backend's namespace, the
separator or `+`, its own name or URI) every such tenant's `tools`, `prompts` or `resources` globs hide.
A server admits tenants and then takes nothing past their policy, so such an item is never listed. Per-
caller rules are left out: they decide per caller, and a rule that hides an item from some callers is
what they are for. Glob items (`uri: "docs://*"`) are judged by their backend only.
"""

from __future__ import annotations

from collections.abc import Iterator
from fnmatch import fnmatchcase

from gateway.catalogue.namespace import exposed_name
from gateway.catalogue.uris import gateway_uri
from gateway.config import Config, TenantConfig
from gateway.config.server_model import ServedPrompt, ServedResource, ServedTemplate, ServedTool

Item = ServedTool | ServedPrompt | ServedResource | ServedTemplate


def unserved_items(config: Config) -> Iterator[str]:
    """A warning for each server item no tenant the server admits could be listed."""
    namespaces = {backend.name: backend.namespace for backend in config.backends}
    for server in config.servers.values():
        tenants = [t for t in config.tenants.values() if server.admits(t.name)]
        for item in (*server.tools, *server.prompts, *server.resources, *server.templates):
            if not any(_uses(t, item.backend) for t in tenants):
                yield f"{item.where}: backend {item.backend!r} is used by no tenant server {server.name} admits"
                continue
            exposed = _exposed(item, namespaces[item.backend], config.catalogue.separator)
            if exposed is not None and not any(_permits(t, item, exposed) for t in tenants if _uses(t, item.backend)):
                yield (f"{item.where}: {exposed!r} is hidden by the {_kind(item)} globs of every tenant "
                       f"server {server.name} admits")


def _uses(tenant: TenantConfig, backend: str) -> bool:
    return "*" in tenant.backends or backend in tenant.backends


def _exposed(item: Item, namespace: str, separator: str) -> str | None:
    """What `/mcp` calls the item's source (None: a glob item, judged by its backend only)."""
    if isinstance(item, ServedTool):
        return exposed_name(namespace, separator, item.tool)
    if isinstance(item, ServedPrompt):
        return exposed_name(namespace, separator, item.prompt)
    return None if item.glob else gateway_uri(namespace, item.source)


def _kind(item: Item) -> str:
    return "tools" if isinstance(item, ServedTool) else "prompts" if isinstance(item, ServedPrompt) else "resources"


def _permits(tenant: TenantConfig, item: Item, exposed: str) -> bool:
    allow, deny = {"tools": (tenant.tools_allow, tenant.tools_deny),
                   "prompts": (tenant.prompts_allow, tenant.prompts_deny),
                   "resources": (tenant.resources_allow, tenant.resources_deny)}[_kind(item)]
    return any(fnmatchcase(exposed, g) for g in allow) and not any(fnmatchcase(exposed, g) for g in deny)

