"""resources/list, resources/templates/list and resources/read, on gateway URIs (catalogue/uris.py).

Through a virtual server (ctx.server), the server's resources and templates only (catalogue.served_resources):
a URI it does not take is not found, exactly as one nobody serves."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.catalogue.listings import RESOURCES, TEMPLATES
from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.servers import served, served_route
from gateway.catalogue.uris import rewrite_contents
from gateway.dispatch.forward import Forwarder, PassThrough, encoded
from gateway.dispatch.refusals import Refusals
from gateway.protocol import spec
from gateway.protocol.errors import InvalidParams, ResourceNotFound
from gateway.protocol.jsonrpc import Message
from gateway.tenancy import RequestContext


class ResourceMethods:
    def __init__(self, *, catalogue: CatalogueService, forwarder: Forwarder, refusals: Refusals | None = None) -> None:
        self.catalogue = catalogue
        self.forwarder = forwarder
        self.refusals = refusals or Refusals(catalogue=catalogue)

    async def list(self, message: Message, ctx: RequestContext) -> orjson.Fragment:
        cursor = (message.params or {}).get("cursor")
        view = self.catalogue.view(ctx.tenant, ctx.principal)
        if ctx.server is not None:
            return served(view, ctx.server).resources.page(cursor)
        return view.listing(RESOURCES).page(cursor)

    async def templates(self, message: Message, ctx: RequestContext) -> orjson.Fragment:
        cursor = (message.params or {}).get("cursor")
        view = self.catalogue.view(ctx.tenant, ctx.principal)
        if ctx.server is not None:
            return served(view, ctx.server).resources.template_page(cursor)
        return view.listing(TEMPLATES).page(cursor)

    async def read(self, message: Message, ctx: RequestContext) -> Any:
        params = message.params or {}
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise InvalidParams("Invalid params: uri must be a string")
        view = self.catalogue.view(ctx.tenant, ctx.principal)
        route = view.resolve_uri(uri) if ctx.server is None else served_route(view, ctx.server, uri)
        if route is None:  # unknown, or not this caller's: the same answer
            self.refusals.hidden_item(ctx, RESOURCES, uri)
            raise ResourceNotFound(uri[:1000])
        ctx.backend, ctx.target = route.backend, route.original
        refusal = view.refusal(RESOURCES, uri, route.backend, ctx.principal, spec.RESOURCES_READ, {})
        if refusal is not None:
            self.refusals.refused(ctx, refusal)
            raise InvalidParams(refusal.message)
        backend = self.forwarder.backend(route.backend)
        try:
            result = await self.forwarder.forward(backend, spec.RESOURCES_READ, {**params, "uri": route.original}, ctx)
        except PassThrough as passed:
            raise PassThrough(_naming_gateway_uri(passed.error, route.original, uri)) from None
        rewrite_contents(result, backend.namespace)
        return encoded(route.backend, result, ctx)


def _naming_gateway_uri(error: orjson.Fragment, original: str, uri: str) -> orjson.Fragment:
    """A backend's error that names its own URI in `data.uri` (SEP-2164) names the client's instead."""
    value = orjson.loads(orjson.dumps(error))  # the error path only: a Fragment keeps just its bytes
    data = value.get("data") if isinstance(value, dict) else None
    if uri == original or not isinstance(data, dict) or data.get("uri") != original:
        return error
    return orjson.Fragment(orjson.dumps({**value, "data": {**data, "uri": uri}}))
