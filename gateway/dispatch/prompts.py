"""prompts/list and prompts/get: the tenant's merged prompts, each got from its backend by its own name."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.catalogue.listings import PROMPTS
from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.uris import rewrite_messages
from gateway.dispatch.forward import Forwarder, encoded
from gateway.protocol import spec
from gateway.protocol.jsonrpc import Message
from gateway.tenancy import RequestContext


class PromptMethods:
    def __init__(self, *, catalogue: CatalogueService, forwarder: Forwarder) -> None:
        self.catalogue = catalogue
        self.forwarder = forwarder

    async def list(self, message: Message, ctx: RequestContext) -> orjson.Fragment:
        cursor = (message.params or {}).get("cursor")
        return self.catalogue.view(ctx.tenant).listing(PROMPTS).page(cursor)

    async def get(self, message: Message, ctx: RequestContext) -> Any:
        params = message.params or {}
        entry = self.catalogue.view(ctx.tenant).listing(PROMPTS).lookup(params.get("name"))
        ctx.backend = entry.backend
        backend = self.forwarder.backend(entry.backend)
        # arguments and _meta pass through as the client sent them; only the name is the backend's
        result = await self.forwarder.forward(backend, spec.PROMPTS_GET, {**params, "name": entry.original}, ctx)
        rewrite_messages(result, backend.namespace)
        return encoded(entry.backend, result, ctx)
