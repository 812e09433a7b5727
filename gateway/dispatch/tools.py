"""tools/list and tools/call."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.uris import rewrite_blocks, rewrite_ui_meta
from gateway.dispatch.forward import Forwarder, encoded
from gateway.errors import InvalidParams
from gateway.protocol import eras, spec
from gateway.protocol.jsonrpc import JsonObject, Message
from gateway.tenancy import RequestContext

MRTR_PARAMS = ("inputResponses", "requestState")
"""A 2026 retry's params that go on to the backend as they came."""


class ToolMethods:
    def __init__(self, *, catalogue: CatalogueService, forwarder: Forwarder, validate_arguments: bool,
                 server_info: Any = None) -> None:
        self.catalogue = catalogue
        self.forwarder = forwarder
        self.validate_arguments = validate_arguments
        self.server_info = server_info  # what a 2026 reply names as its server (StatelessRules.server_info)
        self._completion = eras.completion_tail(server_info)

    async def list(self, message: Message, ctx: RequestContext) -> orjson.Fragment:
        cursor = (message.params or {}).get("cursor")
        return self.catalogue.view(ctx.tenant).page(cursor)

    async def call(self, message: Message, ctx: RequestContext) -> Any:
        params = message.params or {}
        view = self.catalogue.view(ctx.tenant)
        entry = view.lookup(params.get("name"))
        ctx.tool, ctx.backend = entry.exposed, entry.backend
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidParams("Invalid params: arguments must be an object")
        if self.validate_arguments:
            problem = view.validate_arguments(entry, arguments)
            if problem:
                ctx.outcome = "invalid_arguments"
                invalid = {"content": [{"type": "text", "text": problem}], "isError": True}
                return invalid if ctx.envelope is None else eras.completed(invalid, self.server_info, in_place=True)
        forward: JsonObject = {"name": entry.original, "arguments": arguments}
        if isinstance(params.get("_meta"), dict):
            forward["_meta"] = params["_meta"]
        if ctx.envelope is not None and ("inputResponses" in params or "requestState" in params):
            forward.update((key, params[key]) for key in MRTR_PARAMS if key in params)  # a 2026 retry's answers
        backend = self.forwarder.backend(entry.backend)
        result = await self.forwarder.forward(backend, spec.TOOLS_CALL, forward, ctx)
        if result.get("isError"):
            ctx.outcome = "tool_error"
        rewrite_blocks(result.get("content"), backend.namespace)  # resource links name gateway URIs
        if "_meta" in result:  # and so does an MCP Apps UI resource
            rewrite_ui_meta(result["_meta"], backend.namespace)
        if ctx.envelope is None:
            return encoded(entry.backend, result, ctx)
        if result and "resultType" not in result and "_meta" not in result:  # the usual reply: completed
            return encoded(entry.backend, result, ctx, self._completion)  # as it is encoded (its tail)
        # completed before it is encoded (StatelessRules.complete); a fresh reply: ours to change
        return encoded(entry.backend, eras.completed(result, self.server_info, in_place=True), ctx)
