"""2025-11-25 tasks (experimental, SEP-1686) between a session's client and a handshake-era backend that serves them.

A backend whose session declared `tasks.requests.tools.call` (catalogue.listings.TASK_CALLS_OFFER) gets a
session client's task-augmented `tools/call` with its `task` param; its CreateTaskResult goes back with the
taskId inside the gateway's seal (protocol.request_state.TaskRef): the handle names the backend, its taskId and
the flags of the backend session that holds the task (a backend keeps tasks per session), and it opens for the
same tenant and principal only. `tasks/get`, `tasks/result` and `tasks/cancel` name a handle and go to that
backend session with the backend's own taskId; what comes back names the handle again (`taskId`, and the
`related-task` of a result, and of what the backend sends the client meanwhile: an `input_required` task's
elicitation during tasks/result), and a task's tool result gets the rewrites a tools/call result gets. A handle
that is not the caller's, or whose backend is gone, is -32602 as an unknown task is; so is a 2026 task's handle.
Backend sessions are each process's own: a task is reached from the replica that made it (docs/concepts/tasks.md).

`tasks/list` lists what this process handed to the caller (dispatch.task_list), and a backend session's
`notifications/tasks/status` go to the session that made the task, by its handle (`status`). Not served: tasks
on a backend that does not serve them (the `task` param is dropped, and the call runs as any other: the spec's
rule for a receiver without the capability); tasks of 2026 backends for session clients (a tool that requires them is
not listed to session clients), and tasks on virtual servers and the stdio transport (no seal there).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from gateway.catalogue.listings import TASK_CALLS_OFFER
from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.uris import rewrite_blocks, rewrite_ui_meta
from gateway.catalogue.views import TenantView
from gateway.config import Backend
from gateway.dispatch.forward import Forwarder, sealed_for
from gateway.dispatch.subscriptions import Sink
from gateway.dispatch.task_list import TaskRecords, list_tasks
from gateway.protocol import spec
from gateway.protocol.capabilities import needed
from gateway.protocol.errors import InvalidParams, MethodNotFound
from gateway.protocol.jsonrpc import JsonObject, Message
from gateway.protocol.request_state import TaskRef, UnknownTask
from gateway.tenancy import Channel, RequestContext
from gateway.upstream.base import refusal

log = structlog.get_logger("gateway.dispatch")



class SessionTasks:
    def __init__(self, *, catalogue: CatalogueService, forwarder: Forwarder,
                 records: TaskRecords | None = None) -> None:
        """`records`: the tasks handed out so far (a reload's new dispatcher keeps the old one's)."""
        self.catalogue = catalogue
        self.forwarder = forwarder
        self.records = records or TaskRecords()

    def capability(self, ctx: RequestContext, view: TenantView | None = None) -> JsonObject | None:
        """The `tasks` capability for this session's initialize: only where a backend of its tenant serves tasks.
        `view`: the caller's, where the caller has it at hand (one lookup fewer)."""
        if not _can_hold(ctx):
            return None
        if view is None:
            view = self.catalogue.view(ctx.tenant, ctx.principal)
        catalogue = view.catalogue  # a backend of the tenant with tools, and tasks for calling them
        served = any(catalogue.offers(b, TASK_CALLS_OFFER) and catalogue.offers(b, "tools")
                     for b, _ in catalogue.order if view.policy.uses(b))
        return {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}} if served else None

    def augment(self, forward: JsonObject, task: Any, backend: str, ctx: RequestContext) -> bool:
        """Put a call's `task` param in what goes to `backend`, if it serves tasks for this session (else the
        param is dropped and the call runs as any other)."""
        if not isinstance(task, dict):
            raise InvalidParams("Invalid params: task must be an object")
        if not _can_hold(ctx) or not self.catalogue.current.offers(backend, TASK_CALLS_OFFER):
            return False
        forward["task"] = task
        return True

    async def create(self, backend: Backend, forward: JsonObject, ctx: RequestContext) -> JsonObject:
        """A task-augmented tools/call: the backend's CreateTaskResult with its taskId sealed (or, should it run
        the call at once, its result as it is)."""
        result = await self.forwarder.forward(backend, spec.TOOLS_CALL, forward, ctx)
        task = result.get("task")
        if isinstance(task, dict) and isinstance(task.get("taskId"), str):
            assert ctx.seal is not None  # augment() saw it
            ctx.outcome = "task"
            ref = TaskRef(backend.name, task["taskId"], ctx.capabilities)
            handle = ctx.seal.seal_task(ref, sealed_for(ctx))
            self.records.add(sealed_for(ctx), ref, handle, ctx.session_id or "")
            result["task"] = {**task, "taskId": handle}
        return result

    def status(self, backend: str, tenant: str | None, params: JsonObject, sink_for: Callable[[str], Sink] | None,
               ) -> None:
        """A backend session's `notifications/tasks/status`: to the session that made the task, naming its handle
        (dropped when this process did not make it, or its session has no way to be told)."""
        owner = self.records.owner(backend, params["taskId"])
        if owner is None or sink_for is None or not owner[1].client or tenant not in (None, owner[0][0]):
            return
        sink_for(owner[1].client)({"jsonrpc": "2.0", "method": spec.TASKS_STATUS,
                                   "params": {**params, "taskId": owner[1].handle}})

    async def list(self, message: Message, ctx: RequestContext) -> JsonObject:
        """tasks/list: the caller's tasks (dispatch.task_list)."""
        if self.capability(ctx) is None:
            raise MethodNotFound(f"Method not found: {message.method}")
        return await list_tasks(self.records, self.forwarder, message.params, ctx, sealed_for(ctx))

    async def relay(self, message: Message, ctx: RequestContext) -> JsonObject:
        """tasks/get, tasks/result or tasks/cancel, to the task's backend session and back."""
        assert message.method is not None
        if self.capability(ctx) is None:  # not offered to this session: as for any method the gateway lacks
            raise MethodNotFound(f"Method not found: {message.method}")
        params = message.params or {}
        handle = params.get("taskId")
        ref = self._opened(handle, ctx)
        ctx.backend = ref.backend
        backend = self.forwarder.backend(ref.backend)
        forward: JsonObject = {"taskId": ref.task_id}
        if isinstance(params.get("_meta"), dict):
            forward["_meta"] = params["_meta"]
        declared, channel = ctx.capabilities, ctx.channel
        ctx.capabilities = ref.session or frozenset()  # the backend session that holds the task (whoever made it)
        if channel is not None:  # what the backend sends the client meanwhile names the handle too
            ctx.channel = HandleNaming(channel, ref.task_id, handle, declared)
        try:
            result = await self.forwarder.forward(backend, message.method, forward, ctx)
        finally:
            ctx.capabilities, ctx.channel = declared, channel
        return _named(result, handle, ref.task_id, backend.namespace)

    def _opened(self, handle: Any, ctx: RequestContext) -> TaskRef:
        """The task a handle names, if it is a session task of this caller on one of its backends."""
        try:
            assert ctx.seal is not None  # capability() saw it
            ref = ctx.seal.open_task(handle, sealed_for(ctx))
            uses = ctx.tenant.backends
            if ref.session is None:
                raise UnknownTask("a 2026 task")
            if not self.forwarder.knows(ref.backend) or ("*" not in uses and ref.backend not in uses):
                raise UnknownTask("its backend is gone, or no longer the tenant's")
        except UnknownTask as exc:
            log.info("task_handle_refused", reason=exc.reason, request_id=ctx.request_id)  # the client hears -32602
            raise
        return ref


class HandleNaming:
    """A tasks/* request's way back to its client, with the backend's taskId renamed to the client's handle in what
    the backend sends meanwhile (an elicitation of an `input_required` task, its `related-task` in `_meta`; a
    status notification on that stream). The client asked is the one of this request, which may not be the one
    that made the task (the relay checked the flags of the task's backend session): what it did not declare is
    refused here."""

    __slots__ = ("_channel", "_declared", "_handle", "_task_id")

    def __init__(self, channel: Channel, task_id: str, handle: str, declared: frozenset[str]) -> None:
        self._channel, self._task_id, self._handle, self._declared = channel, task_id, handle, declared

    async def notify(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        if isinstance(params, dict):
            message = {**message, "params": self._renamed(params)}
        await self._channel.notify(message)

    async def keepalive(self) -> None:
        await self._channel.keepalive()

    async def ask(self, method: str, params: dict[str, Any] | None, *, timeout: float) -> dict[str, Any]:  # noqa: ASYNC109
        missing = needed(method, params) - self._declared
        if missing:  # as relay.ClientRelay refuses it
            return refusal({}, f"{method} not supported: the client did not declare {', '.join(sorted(missing))}")
        return await self._channel.ask(method, None if params is None else self._renamed(params), timeout=timeout)

    def _renamed(self, params: dict[str, Any]) -> dict[str, Any]:
        renamed = dict(params)
        if renamed.get("taskId") == self._task_id:
            renamed["taskId"] = self._handle
        meta = renamed.get("_meta")
        related = meta.get(spec.RELATED_TASK) if isinstance(meta, dict) else None
        if isinstance(related, dict) and related.get("taskId") == self._task_id:
            renamed["_meta"] = {**meta, spec.RELATED_TASK: {**related, "taskId": self._handle}}  # type: ignore[dict-item]
        return renamed


def _can_hold(ctx: RequestContext) -> bool:
    """Whether this request's client may be handed tasks: a 2025-11-25 session's, on the gateway's own endpoint,
    where handles can be sealed."""
    return (ctx.envelope is None and ctx.seal is not None and ctx.server is None
            and ctx.protocol_version == spec.TASKS_VERSION)


def _named(result: JsonObject, handle: Any, task_id: str, namespace: str) -> JsonObject:
    """A backend's tasks/* result as the client knows the task: by its handle; a tool result with gateway URIs."""
    if result.get("taskId") == task_id:  # a Task (tasks/get, tasks/cancel)
        result["taskId"] = handle
    meta = result.get("_meta")
    related = meta.get(spec.RELATED_TASK) if isinstance(meta, dict) else None
    if isinstance(related, dict) and related.get("taskId") == task_id:  # a tasks/result's
        meta[spec.RELATED_TASK] = {**related, "taskId": handle}  # type: ignore[index]
    rewrite_blocks(result.get("content"), namespace)
    rewrite_ui_meta(meta, namespace)
    return result
