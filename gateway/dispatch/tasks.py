"""tasks/get, tasks/update and tasks/cancel: the 2026-07-28 tasks extension, relayed to the backend that made the task.

A 2026 backend may answer a tools/call whose client declared the extension with a task; the client
gets a gateway handle instead of the backend's taskId (dispatch.forward, protocol.request_state).
A tasks/* request names that handle: it opens for the same tenant and principal only (else -32602,
as an unknown taskId), and goes to the backend it names, with the backend's own taskId (which the
upstream repeats as `Mcp-Name`). What comes back names the handle again, and a completed task's
tool result gets the rewrites a tools/call result gets (resource links, an MCP Apps UI resource).
`inputRequests` and `inputResponses` pass through as they are.

Only 2026 clients that declare the extension reach here (stateless.REQUIRED_CLIENT_CAPABILITIES:
-32021 otherwise); a session's client has no tasks/* methods.
"""

from __future__ import annotations

from typing import Any

import structlog

from gateway.catalogue.uris import rewrite_blocks, rewrite_ui_meta
from gateway.dispatch.forward import Forwarder, sealed_for
from gateway.protocol.errors import MethodNotFound
from gateway.protocol.jsonrpc import JsonObject, Message
from gateway.protocol.request_state import UnknownTask
from gateway.tenancy import RequestContext

log = structlog.get_logger("gateway.dispatch")


class TaskMethods:
    def __init__(self, *, forwarder: Forwarder) -> None:
        self.forwarder = forwarder

    async def relay(self, message: Message, ctx: RequestContext) -> JsonObject:
        """One tasks/* request, to the task's backend and back (see the module docstring)."""
        assert message.method is not None
        if ctx.seal is None:  # no seal on this transport: no task was ever handed out on it
            raise MethodNotFound(f"Method not found: {message.method}")
        params = message.params or {}
        handle = params.get("taskId")
        try:
            ref = ctx.seal.open_task(handle, sealed_for(ctx))
            if ref.session is not None:
                raise UnknownTask("a 2025-11-25 session's task")
            uses = ctx.tenant.backends
            if not self.forwarder.knows(ref.backend) or ("*" not in uses and ref.backend not in uses):
                raise UnknownTask("its backend is gone, or no longer the tenant's")
        except UnknownTask as exc:
            log.info("task_handle_refused", reason=exc.reason, request_id=ctx.request_id)  # the client hears -32602
            raise
        ctx.backend = ref.backend
        backend = self.forwarder.backend(ref.backend)
        forward = {**params, "taskId": ref.task_id}
        result = await self.forwarder.forward(backend, message.method, forward, ctx)
        if "taskId" in result:
            result["taskId"] = handle
        _rewrite(result.get("result"), backend.namespace)
        return result


def _rewrite(result: Any, namespace: str) -> None:
    """A completed task's tool result, as a tools/call's: resource links and a UI resource name gateway URIs."""
    if isinstance(result, dict):
        rewrite_blocks(result.get("content"), namespace)
        rewrite_ui_meta(result.get("_meta"), namespace)
