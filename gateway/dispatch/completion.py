"""completion/complete: routed by its reference (a prompt name, or a resource URI or template)."""

from __future__ import annotations

from typing import Any

from gateway.catalogue.listings import PROMPTS, TEMPLATES
from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.servers import served, served_route
from gateway.catalogue.views import TenantView
from gateway.config.server_model import VirtualServer
from gateway.dispatch.forward import Forwarder, encoded
from gateway.protocol import spec
from gateway.protocol.errors import InvalidParams
from gateway.protocol.jsonrpc import JsonObject, Message
from gateway.tenancy import RequestContext

NO_COMPLETION: JsonObject = {"completion": {"values": [], "total": 0, "hasMore": False}}
"""The answer for a reference whose backend offers no completions."""
BAD_REF = "Invalid params: ref.type must be ref/prompt or ref/resource"


class CompletionMethods:
    def __init__(self, *, catalogue: CatalogueService, forwarder: Forwarder) -> None:
        self.catalogue = catalogue
        self.forwarder = forwarder

    async def complete(self, message: Message, ctx: RequestContext) -> Any:
        params = message.params or {}
        ref = params.get("ref")
        if not isinstance(ref, dict):
            raise InvalidParams("Invalid params: ref must be an object")
        view = self.catalogue.view(ctx.tenant, ctx.principal)
        backend_name, original = _owner(view, ref) if ctx.server is None else _served_owner(view, ctx.server, ref)
        ctx.backend, ctx.target = backend_name, original
        if not view.catalogue.offers(backend_name, "completions"):
            return NO_COMPLETION
        backend = self.forwarder.backend(backend_name)
        key = "name" if ref.get("type") == "ref/prompt" else "uri"
        forward = {**params, "ref": {**ref, key: original}}
        return encoded(backend_name, await self.forwarder.forward(backend, spec.COMPLETION_COMPLETE, forward, ctx), ctx)


def _served_owner(view: TenantView, server: VirtualServer, ref: JsonObject) -> tuple[str, str]:
    """Through a virtual server: its prompt (by the server's name for it), or one of its templates or URIs."""
    kind = ref.get("type")
    if kind == "ref/prompt":
        entry = served(view, server).prompt(ref.get("name"))[1]
        return entry.backend, entry.original
    if kind != "ref/resource":
        raise InvalidParams(BAD_REF)
    uri = ref.get("uri")
    template = served(view, server).resources.templates.get(uri) if isinstance(uri, str) else None
    if template is not None:
        return template.backend, template.original
    route = served_route(view, server, uri)
    if route is None:
        raise InvalidParams(f"Unknown resource: {str(uri)[:200]}")
    return route.backend, route.original


def _owner(view: TenantView, ref: JsonObject) -> tuple[str, str]:
    """(backend, its own name or URI) of a reference; what the tenant cannot see is unknown."""
    kind = ref.get("type")
    if kind == "ref/prompt":
        entry = view.listing(PROMPTS).lookup(ref.get("name"))
        return entry.backend, entry.original
    if kind != "ref/resource":
        raise InvalidParams(BAD_REF)
    uri = ref.get("uri")
    template = view.listing(TEMPLATES).by_key.get(uri) if isinstance(uri, str) else None
    if template is not None:
        return template.backend, template.original
    route = view.resolve_uri(uri)
    if route is None:
        raise InvalidParams(f"Unknown resource: {str(uri)[:200]}")
    return route.backend, route.original
