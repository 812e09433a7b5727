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

from gateway.audit import AUDITED_METHODS, AuditTrail
from gateway.catalogue.listings import SUBSCRIBE, TASKS_OFFER
from gateway.catalogue.refresher import CatalogueService
from gateway.client_logs import LevelSetter
from gateway.config import Config
from gateway.dispatch import servers
from gateway.dispatch.completion import CompletionMethods
from gateway.dispatch.forward import Forwarder, PassThrough
from gateway.dispatch.listen import ListenStreams
from gateway.dispatch.prompts import PromptMethods
from gateway.dispatch.refusals import DENIED, Refusals
from gateway.dispatch.resources import ResourceMethods
from gateway.dispatch.scopes import ScopeRules
from gateway.dispatch.session_tasks import SessionTasks
from gateway.dispatch.stateless import StatelessRules
from gateway.dispatch.subscriptions import Subscriptions
from gateway.dispatch.task_list import TaskRecords
from gateway.dispatch.tasks import TaskMethods
from gateway.dispatch.tools import ToolMethods
from gateway.logs import clip
from gateway.oauth.outbound import BackendCredentials
from gateway.protocol import jsonrpc, spec
from gateway.protocol.capabilities import ROOTS
from gateway.protocol.errors import (
    BackendError,
    GatewayError,
    InsufficientScope,
    InternalError,
    InvalidParams,
    MethodNotFound,
    ResourceNotFound,
)
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
                 subscriptions: Subscriptions | None = None, listeners: ListenStreams | None = None,
                 credentials: BackendCredentials | None = None, audit: AuditTrail | None = None,
                 task_records: TaskRecords | None = None) -> None:
        """`subscriptions`, `listeners` and `task_records` (the 2025-11-25 tasks handed out, dispatch.task_list)
        outlive a reload: the process's, handed to each new dispatcher.
        `credentials`: the OAuth tokens of backends with an `auth` (None when no backend has one).
        `audit`: the process's audit trail (None: auditing off), kept by every reload too."""
        self.config = config
        self.audit = audit
        self.metrics = metrics
        self.catalogue = catalogue
        self.pool = pool
        self.list_changed = list_changed
        self.scopes = ScopeRules(config, catalogue)  # what a token must hold for each request
        relisted = catalogue.relisting.served if list_changed else None  # a change may need telling
        forwarder = Forwarder(config=config, pool=pool, metrics=metrics, on_served=relisted, credentials=credentials)
        self.stateless = StatelessRules(server_info=SERVER_INFO, backend_hints=self._list_ttl_hints)
        refusals = Refusals(catalogue=catalogue, metrics=metrics)
        self.session_tasks = SessionTasks(catalogue=catalogue, forwarder=forwarder, records=task_records)
        tools = ToolMethods(catalogue=catalogue, forwarder=forwarder, tasks=self.session_tasks,
                            validate_arguments=config.catalogue.validate_arguments,
                            server_info=self.stateless.server_info, refusals=refusals)
        prompts = PromptMethods(catalogue=catalogue, forwarder=forwarder, refusals=refusals)
        resources = ResourceMethods(catalogue=catalogue, forwarder=forwarder, refusals=refusals)
        # Change notifications need a way to clients outside their requests: GET streams, stdout, listen.
        if subscriptions is None:
            subscriptions = Subscriptions(catalogue=catalogue, forwarder=forwarder, tenants=config.tenants,
                                          servers=config.servers)
        else:
            subscriptions.rebind(forwarder, config.tenants, config.servers)  # this config's backends from now on
        self.subscriptions = subscriptions
        subscriptions.on_task_status = self.session_tasks.status  # a task's status, to the session that made it
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
        self._methods.update((method, self.session_tasks.relay)  # a session's
                             for method in spec.SESSION_TASK_METHODS - {spec.TASKS_LIST})
        self._methods[spec.TASKS_LIST] = self.session_tasks.list
        self._stateless_methods = self.stateless.methods(table, self._discover, self._catalogue_version)
        # a virtual server's requests (ctx.server): its few methods only (dispatch.servers)
        self._server_methods = {m: h for m, h in self._methods.items() if m in servers.SERVER_METHODS}
        self._server_stateless_methods = self.stateless.methods(
            {m: h for m, h in table.items() if m in servers.SERVER_METHODS}, self._discover, self._catalogue_version)

    async def handle(self, message: Message, ctx: RequestContext) -> JsonObject | None:
        """The reply to a request, or None for a notification or a response."""
        if not message.is_request:
            return None
        assert message.id is not None and message.method is not None
        started = time.perf_counter()
        envelope = ctx.envelope  # None: a session's request; else a 2026-07-28 one
        try:
            if self.scopes.enabled:  # HTTP asked before (a 403 the client steps up from); batches and stdio here
                self.scopes.check(ctx.principal, ctx.tenant, message.method, message.params, ctx.server)
            if ctx.server is None:
                handler = (self._methods if envelope is None else self._stateless_methods).get(message.method)
            else:
                ctx.extra["server"] = ctx.server.name  # the request's log line names the virtual server
                handler = (self._server_methods if envelope is None else self._server_stateless_methods).get(
                    message.method) if servers.answers(ctx.server, message.method) else None
            if handler is None:
                raise MethodNotFound(f"Method not found: {message.method[:200]}")
            if not self.catalogue.ready.is_set() and message.method != spec.PING:
                await self.catalogue.first_build()  # else a starting worker answers from an empty catalogue
            reply = jsonrpc.result_response(message.id, await handler(message, ctx))  # 2026's complete their results
        except PassThrough as passed:
            error = passed.error if envelope is None else self.stateless.passed_error(passed.error)
            reply = {"jsonrpc": "2.0", "id": message.id, "error": error}
        except GatewayError as exc:
            if ctx.outcome != DENIED:  # a caller's rules hid the item: the log says so (the reply does not)
                ctx.outcome = _outcome(exc)
            if envelope is not None and isinstance(exc, ResourceNotFound):  # 2026 has no -32002
                exc = InvalidParams(exc.message, data=exc.data)
            if ctx.span is not None:
                ctx.span.failed(exc.code, exc.message)
            reply = jsonrpc.error_response(message.id, exc)
        except Exception:
            log.exception("dispatch_failed", method=clip(message.method), request_id=ctx.request_id)
            ctx.outcome = "error"
            if ctx.span is not None:
                ctx.span.failed(spec.INTERNAL_ERROR, "Internal error")
            reply = jsonrpc.error_response(message.id, InternalError("Internal error"))
        finally:
            if self.metrics is not None:
                self.metrics.dispatched(message.method, ctx, time.perf_counter() - started)
        if self.audit is not None and message.method in AUDITED_METHODS:  # auditing off: this one check
            waiting = self.audit.call(started, message.method, message.raw, reply, ctx)
            if waiting is not None:  # audit.policy block, and the trail's queue is full
                await waiting
        return reply

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
            "instructions": INSTRUCTIONS if ctx.server is None else servers.instructions(ctx.server, INSTRUCTIONS),
        }

    async def _discover(self, message: Message, ctx: RequestContext) -> JsonObject:
        capabilities = self.capabilities(ctx)
        if ctx.server is not None:
            return self.stateless.discover(capabilities, servers.instructions(ctx.server, INSTRUCTIONS),
                                           listen=self.list_changed)
        # the tasks extension, relayed from the caller's 2026 backends (dispatch.tasks)
        if self.catalogue.view(ctx.tenant, ctx.principal).extends(TASKS_OFFER):
            capabilities["extensions"] = {spec.TASKS_EXTENSION: {}}
        return self.stateless.discover(capabilities, INSTRUCTIONS, listen=self.list_changed)

    def capabilities(self, ctx: RequestContext) -> JsonObject:
        """What this tenant is served: each capability only when one of its backends serves it (tools also
        while a backend is not listed yet: TenantView.offers); `listChanged` wherever the gateway tells of
        changes (it re-lists its backends and notifies whatever changed, announced or not).

        initialize states it; server/discover derives its 2026 form from it.
        """
        if ctx.server is not None:
            return servers.capabilities(ctx.server, self.list_changed, self.catalogue.current)
        view = self.catalogue.view(ctx.tenant, ctx.principal)
        changed = {"listChanged": self.list_changed}
        capabilities: JsonObject = {"tools": changed} if view.offers("tools") else {}
        for capability in ("prompts", "resources"):
            if view.offers(capability):
                capabilities[capability] = changed
        if self.list_changed and "resources" in capabilities and view.offers(SUBSCRIBE):  # relayed from backends
            capabilities["resources"] = {"subscribe": True, **changed}
        if view.offers("completions"):
            capabilities["completions"] = {}
        if view.offers("logging"):  # the gateway keeps each client's level, and filters the backends' messages
            capabilities["logging"] = {}
        if ctx.envelope is None and (tasks := self.session_tasks.capability(ctx, view)) is not None:
            capabilities["tasks"] = tasks  # relayed from the tenant's backends (dispatch.session_tasks)
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
    if isinstance(exc, InsufficientScope):
        return "insufficient_scope"
    return {spec.METHOD_NOT_FOUND: "method_not_found", spec.INVALID_PARAMS: "invalid_params",
            spec.RESOURCE_NOT_FOUND: "not_found"}.get(exc.code, "error")
