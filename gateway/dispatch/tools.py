"""tools/list and tools/call."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.catalogue.discovery import FIND_TOOLS, GATEWAY_TOOLS
from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.servers import served
from gateway.catalogue.uris import rewrite_blocks, rewrite_ui_meta
from gateway.dispatch.discovery import SearchTools
from gateway.dispatch.forward import Forwarder, encoded
from gateway.dispatch.refusals import Refusals
from gateway.dispatch.servers import served_call
from gateway.dispatch.session_tasks import SessionTasks
from gateway.protocol import eras, spec
from gateway.protocol.errors import InvalidParams
from gateway.protocol.jsonrpc import JsonObject, Message
from gateway.tenancy import RequestContext

MRTR_PARAMS = ("inputResponses", "requestState")
"""A 2026 retry's params that go on to the backend as they came."""


class ToolMethods:
    def __init__(self, *, catalogue: CatalogueService, forwarder: Forwarder, validate_arguments: bool,
                 server_info: Any = None, refusals: Refusals | None = None, tasks: SessionTasks | None = None) -> None:
        self.catalogue = catalogue
        self.tasks = tasks or SessionTasks(catalogue=catalogue, forwarder=forwarder)
        self.forwarder = forwarder
        self.refusals = refusals or Refusals(catalogue=catalogue)
        self.search_tools = SearchTools(catalogue)
        self.validate_arguments = validate_arguments
        self.server_info = server_info  # what a 2026 reply names as its server (StatelessRules.server_info)
        self._completion = eras.completion_tail(server_info)

    async def list(self, message: Message, ctx: RequestContext) -> orjson.Fragment:
        cursor = (message.params or {}).get("cursor")
        view = self.catalogue.client_view(ctx.tenant, ctx.principal, ctx.capabilities, ctx.envelope is not None)
        return view.page(cursor) if ctx.server is None else served(view, ctx.server).page(cursor)

    async def call(self, message: Message, ctx: RequestContext) -> Any:
        params = message.params or {}
        view = self.catalogue.client_view(ctx.tenant, ctx.principal, ctx.capabilities, ctx.envelope is not None)
        name, arguments = params.get("name"), params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidParams("Invalid params: arguments must be an object")
        if ctx.server is not None:  # a virtual server's tool: its source, with the arguments the server fixes
            resolved = served_call(view, ctx.server, name, arguments)  # an unknown name: InvalidParams
            if isinstance(resolved, str):
                return self._error_result(resolved, ctx)
            name, arguments = resolved[0].exposed, resolved[1]
        elif view.search is not None and name in GATEWAY_TOOLS:  # search mode's own tools (dispatch.discovery)
            ctx.tool = name
            if name == FIND_TOOLS:
                found = await self.search_tools.find(view, arguments)
                return self._error_result(found, ctx) if isinstance(found, str) else self._completed(found, ctx)
            target = self.search_tools.unwrap(arguments)
            if isinstance(target, str):
                return self._error_result(target, ctx)
            name, arguments = target
            if name not in view.by_name:  # the model's slip: it reads this and searches again
                self.refusals.hidden_tool(ctx, name)
                return self._error_result(f"Unknown tool: {name[:200]}; {FIND_TOOLS} gives the names", ctx)
        try:
            entry = view.lookup(name)
        except InvalidParams:
            self.refusals.hidden_tool(ctx, name)
            raise
        ctx.tool, ctx.backend, ctx.target = entry.exposed, entry.backend, entry.original
        if view.plans:  # rules that read the request, or argument limits: checked before anything is sent
            refusal = view.tool_refusal(entry, arguments, ctx.principal)
            if refusal is not None:
                self.refusals.refused(ctx, refusal)
                return self._error_result(self._named(refusal.message, entry.exposed, params, ctx), ctx)
        if self.validate_arguments:
            problem = view.validate_arguments(entry, arguments)
            if problem:
                ctx.outcome = "invalid_arguments"
                return self._error_result(self._named(problem, entry.exposed, params, ctx), ctx)
        forward: JsonObject = {"name": entry.original, "arguments": arguments}
        if isinstance(params.get("_meta"), dict):
            forward["_meta"] = params["_meta"]
        if ctx.envelope is not None and ("inputResponses" in params or "requestState" in params):
            forward.update((key, params[key]) for key in MRTR_PARAMS if key in params)  # a 2026 retry's answers
        backend = self.forwarder.backend(entry.backend)
        if "task" in params and ctx.envelope is None and self.tasks.augment(forward, params["task"], backend.name, ctx):
            result = await self.tasks.create(backend, forward, ctx)  # 2025-11-25 tasks (dispatch.session_tasks)
        else:
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

    @staticmethod
    def _named(text: str, exposed: str, params: JsonObject, ctx: RequestContext) -> str:
        """A refusal's text as its caller knows the tool: through a virtual server, by the server's name for it."""
        if ctx.server is None:
            return text
        return text.replace(f"tool {exposed}:", f"tool {params.get('name')}:", 1)

    def _error_result(self, text: str, ctx: RequestContext) -> JsonObject:
        """A call refused before its backend: a tool error result, which the model reads and can act on."""
        return self._completed({"content": [{"type": "text", "text": text}], "isError": True}, ctx)

    def _completed(self, result: JsonObject, ctx: RequestContext) -> JsonObject:
        """A result of the gateway's own, in the request's era."""
        return result if ctx.envelope is None else eras.completed(result, self.server_info, in_place=True)
