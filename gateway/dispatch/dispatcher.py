"""The MCP methods, free of any transport: `handle(message, ctx) -> reply`.

HTTP and stdio both call `Dispatcher.handle`; it never sees a socket or a header. The methods
themselves live beside it, one module per family (tools, prompts, resources, completion).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import structlog

from gateway.catalogue.listings import SUBSCRIBE, TASKS_OFFER
from gateway.catalogue.refresher import CatalogueService
from gateway.client_logs import LevelSetter
from gateway.config import Config
from gateway.dispatch.completion import CompletionMethods
from gateway.dispatch.forward import Forwarder, PassThrough
from gateway.dispatch.listen import ListenStreams
from gateway.dispatch.prompts import PromptMethods
from gateway.dispatch.resources import ResourceMethods
from gateway.dispatch.stateless import StatelessRules
from gateway.dispatch.subscriptions import Subscriptions
from gateway.dispatch.tasks import TaskMethods
from gateway.dispatch.tools import ToolMethods
from gateway.errors import BackendError, GatewayError, InternalError, InvalidParams, MethodNotFound, ResourceNotFound
from gateway.logs import clip
from gateway.protocol import jsonrpc, spec
from gateway.protocol.capabilities import ROOTS
from gateway.protocol.jsonrpc import JsonObject, Message
from gateway.tenancy import RequestContext
from gateway.upstream.pool import UpstreamPool

if TYPE_CHECKING:
    from gateway.metrics import Metrics

log = structlog.get_logger("gateway.dispatch")

SERVER_INFO = {"name": "mcp-gateway", "title": "MCP Gateway", "version": "0.1.0"}
INSTRUCTIONS = ("Tools, prompts and resources from several MCP servers: each tool and prompt name is prefixed "
                "by its server's namespace, and each resource URI by the namespace and '+'.")

Handler = Callable[[Message, RequestContext], Awaitable[Any]]


class Dispatcher:
    def __init__(self, *, config: Config, catalogue: CatalogueService, pool: UpstreamPool,
                 list_changed: bool = False, metrics: Metrics | None = None,
                 subscriptions: Subscriptions | None = None, listeners: ListenStreams | None = None) -> None:
        """`subscriptions` and `listeners` outlive a reload: the process's, handed to each new dispatcher."""
        self.config = config
        self.metrics = metrics
        self.catalogue = catalogue
        self.pool = pool
        self.list_changed = list_changed
        relisted = catalogue.relisting.served if list_changed else None  # a change may need telling
        forwarder = Forwarder(config=config, pool=pool, metrics=metrics, on_served=relisted)
        self.stateless = StatelessRules(server_info=SERVER_INFO, backend_hints=self._list_ttl_hints)
        tools = ToolMethods(catalogue=catalogue, forwarder=forwarder,
                            validate_arguments=config.catalogue.validate_arguments,
                            server_info=self.stateless.server_info)
        prompts = PromptMethods(catalogue=catalogue, forwarder=forwarder)
        resources = ResourceMethods(catalogue=catalogue, forwarder=forwarder)
        # Change notifications need a way to clients outside their requests: GET streams, stdout, listen.
        if subscriptions is None:
            subscriptions = Subscriptions(catalogue=catalogue, forwarder=forwarder, tenants=config.tenants)
        else:
            subscriptions.rebind(forwarder, config.tenants)  # this config's backends from now on
        self.subscriptions = subscriptions
        self.listeners = listeners or ListenStreams(subscriptions=subscriptions)
        self._methods: dict[str, Handler] = {
            spec.INITIALIZE: self._initialize,
            spec.PING: self._ping,
            spec.TOOLS_LIST: tools.list,
            spec.TOOLS_CALL: tools.call,
            spec.PROMPTS_LIST: prompts.list,
            spec.PROMPTS_GET: prompts.get,
            spec.RESOURCES_LIST: resources.list,
            spec.RESOURCES_TEMPLATES_LIST: resources.templates,
            spec.RESOURCES_READ: resources.read,
            spec.RESOURCES_SUBSCRIBE: self.subscriptions.subscribe,
            spec.RESOURCES_UNSUBSCRIBE: self.subscriptions.unsubscribe,
            spec.COMPLETION_COMPLETE: CompletionMethods(catalogue=catalogue, forwarder=forwarder).complete,
            spec.LOGGING_SET_LEVEL: self._set_level,
        }
        self._levels = LevelSetter(config, pool.get)
        table = dict(self._methods)
        if list_changed:  # 2026 clients hear of changes only on a listen stream
            table[spec.SUBSCRIPTIONS_LISTEN] = self.listeners.listen
        relay_task = TaskMethods(forwarder=forwarder).relay  # the tasks extension: 2026 only
        table.update((method, relay_task) for method in spec.TASK_METHODS)
        self._stateless_methods = self.stateless.methods(table, self._discover, self._catalogue_version)

    async def handle(self, message: Message, ctx: RequestContext) -> JsonObject | None:
        """The reply to a request, or None for a notification or a response."""
        if not message.is_request:
            return None
        assert message.id is not None and message.method is not None
        started = time.perf_counter()
        envelope = ctx.envelope  # None: a session's request; else a 2026-07-28 one
        try:
            handler = (self._methods if envelope is None else self._stateless_methods).get(message.method)
            if handler is None:
                raise MethodNotFound(f"Method not found: {message.method[:200]}")
            return jsonrpc.result_response(message.id, await handler(message, ctx))  # 2026's complete their results
        except PassThrough as passed:
            error = passed.error if envelope is None else self.stateless.passed_error(passed.error)
            return {"jsonrpc": "2.0", "id": message.id, "error": error}
        except GatewayError as exc:
            ctx.outcome = _outcome(exc)
            if envelope is not None and isinstance(exc, ResourceNotFound):  # 2026 has no -32002
                exc = InvalidParams(exc.message, data=exc.data)
            return jsonrpc.error_response(message.id, exc)
        except Exception:
            log.exception("dispatch_failed", method=clip(message.method), request_id=ctx.request_id)
            ctx.outcome = "error"
            return jsonrpc.error_response(message.id, InternalError("Internal error"))
        finally:
            if self.metrics is not None:
                self.metrics.dispatched(message.method, ctx, time.perf_counter() - started)

    def _catalogue_version(self) -> str:
        return self.catalogue.current.version

    def _list_ttl_hints(self) -> Iterator[int | None]:
        """How long each backend lets its lists be cached (2026 backends say; None: no word)."""
        return (upstream.list_ttl_ms for upstream in self.pool)

    # ---------------------------------------------------------------- the gateway's own methods

    async def _initialize(self, message: Message, ctx: RequestContext) -> JsonObject:
        requested = (message.params or {}).get("protocolVersion")
        return {
            "protocolVersion": spec.negotiate_version(requested),
            "capabilities": self.capabilities(ctx),
            "serverInfo": SERVER_INFO,
            "instructions": INSTRUCTIONS,
        }

    async def _discover(self, message: Message, ctx: RequestContext) -> JsonObject:
        capabilities = self.capabilities(ctx)
        if self.catalogue.view(ctx.tenant).extends(TASKS_OFFER):  # relayed from its 2026 backends (dispatch.tasks)
            capabilities["extensions"] = {spec.TASKS_EXTENSION: {}}
        return self.stateless.discover(capabilities, INSTRUCTIONS, listen=self.list_changed)

    def capabilities(self, ctx: RequestContext) -> JsonObject:
        """What this tenant is served: prompts, resources and completions only when one of its backends has them.

        initialize states it; server/discover derives its 2026 form from it.
        """
        view = self.catalogue.view(ctx.tenant)
        changed = {"listChanged": self.list_changed}
        capabilities: JsonObject = {"tools": changed}
        for capability in ("prompts", "resources"):
            if view.offers(capability):
                capabilities[capability] = changed
        if self.list_changed and "resources" in capabilities and view.offers(SUBSCRIBE):  # relayed from backends
            capabilities["resources"] = {"subscribe": True, **changed}
        if view.offers("completions"):
            capabilities["completions"] = {}
        capabilities["logging"] = {}  # always served: the gateway keeps each client's level and filters by it
        return capabilities

    async def roots_changed(self, ctx: RequestContext) -> None:
        """A client's `notifications/roots/list_changed`, to the backend sessions that may ask it for roots.

        A backend session is shared by the clients of one tenant that declared the same capabilities
        (never across tenants; stdio backends have one for all): each hears it, and its next roots/list
        during a call goes to that call's client, as every relayed request does.
        """
        if ROOTS not in ctx.capabilities:
            return  # its backend sessions were never told of roots
        uses = ctx.tenant.backends
        await asyncio.gather(*(upstream.notify(spec.ROOTS_LIST_CHANGED, None, session_key=ctx.principal.tenant,
                                               capabilities=ctx.capabilities)
                               for upstream in self.pool if "*" in uses or upstream.name in uses))

    async def _ping(self, message: Message, ctx: RequestContext) -> JsonObject:
        return {}

    async def _set_level(self, message: Message, ctx: RequestContext) -> JsonObject:
        return await self._levels(message.params, ctx)


def _outcome(exc: GatewayError) -> str:
    if isinstance(exc, BackendError):
        return exc.reason
    return {spec.METHOD_NOT_FOUND: "method_not_found", spec.INVALID_PARAMS: "invalid_params",
            spec.RESOURCE_NOT_FOUND: "not_found"}.get(exc.code, "error")
