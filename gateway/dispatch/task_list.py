"""tasks/list for 2025-11-25 sessions: the tasks this process handed to the caller, each as its backend sees it now.

A backend session is shared by the tenant's clients that declared alike (and a stdio child by every tenant), so
a backend's own tasks/list spans other principals' tasks. The gateway lists instead what it made for this
principal (tenant and subject, the binding of its handles): it remembers each handle it gave out (TaskRecords,
the last MAX_TASKS per principal, MAX_PRINCIPALS principals, in this process: a backend session and its tasks
are this process's too), and a page asks each task's backend session for it (`tasks/get`, at most PAGE_SIZE
at once). A task its backend no longer knows (expired, its session gone) is forgotten and left out; one whose
backend cannot be reached now, or is no longer the tenant's, is left out of this page. The cursor is the gateway's
own (`tl1.<n>`: the tasks after the n-th handed out); any other is -32602.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Final

from gateway.dispatch.forward import Forwarder, PassThrough
from gateway.protocol import spec
from gateway.protocol.errors import BackendError, InvalidParams
from gateway.protocol.jsonrpc import JsonObject
from gateway.protocol.request_state import Principal, TaskRef
from gateway.tenancy import RequestContext

MAX_TASKS: Final = 100
MAX_PRINCIPALS: Final = 10_000
PAGE_SIZE: Final = 20
CURSOR: Final = "tl1."


@dataclass(frozen=True, slots=True)
class Made:
    """A task handed out: its place in the order, what it names, and the handle its client knows."""

    seq: int
    ref: TaskRef
    handle: str
    client: str = ""  # the session it was made in: where its status notifications go


class TaskRecords:
    """The 2025-11-25 tasks this process handed out, per principal, bounded (oldest dropped first)."""

    def __init__(self, *, per_principal: int = MAX_TASKS, principals: int = MAX_PRINCIPALS) -> None:
        self._made: OrderedDict[Principal, OrderedDict[str, Made]] = OrderedDict()
        self._by_task: dict[tuple[str, str], tuple[Principal, Made]] = {}  # (backend, its taskId) -> whose
        self._seq = itertools.count(1)
        self._per_principal, self._principals = per_principal, principals

    def add(self, principal: Principal, ref: TaskRef, handle: str, client: str = "") -> None:
        made = self._made.pop(principal, None) or OrderedDict()
        self._made[principal] = made  # the most recent caller last
        made[handle] = entry = Made(next(self._seq), ref, handle, client)
        self._by_task[(ref.backend, ref.task_id)] = principal, entry
        while len(made) > self._per_principal:
            self._unindex(made.popitem(last=False)[1])
        while len(self._made) > self._principals:
            for dropped in self._made.popitem(last=False)[1].values():
                self._unindex(dropped)

    def owner(self, backend: str, task_id: str) -> tuple[Principal, Made] | None:
        """Whose task this is, and its handle, if this process handed it out."""
        return self._by_task.get((backend, task_id))

    def page(self, principal: Principal, after: int, size: int) -> tuple[list[Made], bool]:
        """The principal's tasks handed out after the `after`-th, at most `size`, and whether more follow."""
        later = [made for made in self._made.get(principal, {}).values() if made.seq > after]
        return later[:size], len(later) > size

    def forget(self, principal: Principal, handle: str) -> None:
        made = self._made.get(principal)
        forgotten = made.pop(handle, None) if made is not None else None
        if forgotten is not None:
            self._unindex(forgotten)

    def _unindex(self, made: Made) -> None:
        self._by_task.pop((made.ref.backend, made.ref.task_id), None)


async def list_tasks(records: TaskRecords, forwarder: Forwarder, params: JsonObject | None,
                     ctx: RequestContext, principal: Principal) -> JsonObject:
    """One page of the caller's tasks (see the module docstring)."""
    page, more = records.page(principal, _after((params or {}).get("cursor")), PAGE_SIZE)
    found = await asyncio.gather(*(_status(records, forwarder, made, ctx, principal) for made in page))
    result: JsonObject = {"tasks": [task for task in found if task is not None]}
    if more:
        result["nextCursor"] = f"{CURSOR}{page[-1].seq}"
    return result


async def _status(records: TaskRecords, forwarder: Forwarder, made: Made, ctx: RequestContext,
                  principal: Principal) -> JsonObject | None:
    """The task as its backend session sees it now, named by its handle; None when it cannot be told."""
    ref, uses = made.ref, ctx.tenant.backends
    if not forwarder.knows(ref.backend) or ("*" not in uses and ref.backend not in uses):
        return None
    own = replace(ctx, capabilities=ref.session or frozenset(), channel=None)  # its backend session; no asking
    try:
        task = await forwarder.forward(forwarder.backend(ref.backend), spec.TASKS_GET, {"taskId": ref.task_id}, own)
    except PassThrough:  # the backend no longer knows it (expired, or its session is gone)
        records.forget(principal, made.handle)
        return None
    except BackendError:
        return None
    return {**task, "taskId": made.handle}


def _after(cursor: Any) -> int:
    if cursor is None:
        return 0
    number = cursor[len(CURSOR):] if isinstance(cursor, str) and cursor.startswith(CURSOR) else ""
    if 0 < len(number) <= 18 and number.isascii() and number.isdigit():
        return int(number)
    raise InvalidParams("Invalid params: bad cursor")
