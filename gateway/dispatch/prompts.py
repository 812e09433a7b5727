"""prompts/list and prompts/get: the tenant's merged prompts, each got from its backend by its own name."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.catalogue.listings import PROMPTS
from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.servers import served
from gateway.catalogue.uris import rewrite_messages
from gateway.dispatch.forward import Forwarder, encoded
from gateway.dispatch.refusals import Refusals
from gateway.dispatch.servers import served_get
from gateway.protocol import spec
from gateway.protocol.errors import InvalidParams
from gateway.protocol.jsonrpc import Message
from gateway.tenancy import RequestContext


class PromptMethods:
    def __init__(self, *, catalogue: CatalogueService, forwarder: Forwarder, refusals: Refusals | None = None) -> None:
        self.catalogue = catalogue
        self.forwarder = forwarder
        self.refusals = refusals or Refusals(catalogue=catalogue)

    async def list(self, message: Message, ctx: RequestContext) -> orjson.Fragment:
        cursor = (message.params or {}).get("cursor")
        view = self.catalogue.view(ctx.tenant, ctx.principal)
        if ctx.server is not None:
            return served(view, ctx.server).prompt_page(cursor)
        return view.listing(PROMPTS).page(cursor)

    async def get(self, message: Message, ctx: RequestContext) -> Any:
        params = message.params or {}
        view = self.catalogue.view(ctx.tenant, ctx.principal)
        try:
            if ctx.server is None:
                entry = view.listing(PROMPTS).lookup(params.get("name"))
            else:  # a virtual server's: its source, with the arguments the server fixes
                entry, params = served_get(view, ctx.server, params)
        except InvalidParams:
            self.refusals.hidden_item(ctx, PROMPTS, params.get("name"))
            raise
        ctx.backend, ctx.target = entry.backend, entry.original
        arguments = params.get("arguments")
        refusal = view.refusal(PROMPTS, entry.exposed, entry.backend, ctx.principal, spec.PROMPTS_GET,
                               arguments if isinstance(arguments, dict) else {})
        if refusal is not None:
            self.refusals.refused(ctx, refusal)
            raise InvalidParams(refusal.message)
        backend = self.forwarder.backend(entry.backend)
        # arguments and _meta pass through as the client sent them; only the name is the backend's
        result = await self.forwarder.forward(backend, spec.PROMPTS_GET, {**params, "name": entry.original}, ctx)
        rewrite_messages(result, backend.namespace)
        return encoded(entry.backend, result, ctx)
