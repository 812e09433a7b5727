"""The audit trail: records leave the request path through bounded queues and reach each sink in order.

    request path ──Entry──> entries (bounded) ──writer: record, seal──> one queue per sink ──> file | redis | stdout

The request path only appends a tuple of what it already holds (`Entry`); the writer task builds each
record, seals it into the chain and hands the batch's lines to every sink's own queue, so a slow or
broken sink (Redis down) holds up only itself. When a queue is full, `policy` decides:
`block` waits for room (the caller's reply waits with it: nothing is lost while a sink is down,
as long as it comes back), `drop` discards the record for that sink and counts it
(`on_dropped`, mcpgw_audit_dropped_total). A sink that fails keeps its batch and retries it,
backing off, until it gets through.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from typing import Any, Generic, TypeVar

import structlog

from gateway.audit.chain import Chain
from gateway.audit.record import Entry, RecordMaker, admin_record
from gateway.audit.sinks import Sink

log = structlog.get_logger("gateway.audit")

T = TypeVar("T")
Dropped = Callable[[str, int], None]
"""Hears of records a sink will never get: (sink name, count)."""
MAX_BATCH = 512
"""Records per sink write, at most (a Redis script call carries one batch)."""
RETRY_SECONDS = (0.05, 2.0)
"""A failing sink's first wait before it tries its batch again, and the longest (doubling between)."""
GATHER_SECONDS = 0.2
"""The writer's pause after each batch, so the next holds what came meanwhile (a record reaches its sinks up to
this much later; the reply does not wait for it). A queue half full ends it early."""
CLOSE_SECONDS = 5.0
"""The longest a stop waits for queued records to reach their sinks."""


class Pipe(Generic[T]):
    """A bounded FIFO between producers and one consumer task, taken a batch at a time.

    `offer` runs on the request path: a waiting consumer is woken through a future of its own (an
    asyncio.Event's methods are Python calls; `waiter` is None except while the consumer waits)."""

    def __init__(self, size: int) -> None:
        self.items: deque[T] = deque()
        self.size = size
        self.waiter: asyncio.Future[None] | None = None  # the consumer's, while it waits for an item
        self._room = asyncio.Event()

    def offer(self, item: T) -> bool:
        """Append unless full; False when full."""
        if len(self.items) >= self.size:
            return False
        self.items.append(item)
        if self.waiter is not None:
            self.wake()
        return True

    def extend(self, items: list[T]) -> None:
        """Append them all (the caller made sure there is room)."""
        self.items.extend(items)
        if self.waiter is not None:
            self.wake()

    def wake(self) -> None:
        assert self.waiter is not None
        _wake(self.waiter)
        self.waiter = None

    async def put(self, item: T) -> None:
        """Append, waiting for room as long as it takes."""
        while not self.offer(item):
            self._room.clear()
            await self._room.wait()

    async def take(self) -> list[T]:
        """The oldest items (at least one, at most MAX_BATCH), waiting for one to come."""
        while not self.items:
            waiter = self.waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self.waiter = None
        items = self.items
        if len(items) <= MAX_BATCH:
            batch = list(items)
            items.clear()
        else:
            batch = [items.popleft() for _ in range(MAX_BATCH)]
        self._room.set()
        return batch


class SinkWorker:
    """One sink's queue and the task that writes it; `failing` says why its last write did not get through."""

    def __init__(self, sink: Sink, size: int) -> None:
        self.sink, self.pipe = sink, Pipe[bytes](size)
        self.failing: str | None = None
        self.holding = 0  # records of the batch being written (or retried)

    async def run(self) -> None:
        while True:
            batch = await self.pipe.take()
            self.holding = len(batch)
            await self._deliver(batch)
            self.holding = 0

    async def _deliver(self, batch: list[bytes]) -> None:
        wait = RETRY_SECONDS[0]
        while True:
            try:
                await self.sink.write(batch)
            except Exception as exc:  # any failure: the batch stays here and goes again
                if self.failing is None:
                    log.warning("audit_sink_failed", sink=self.sink.name, error=type(exc).__name__,
                                queued=len(self.pipe.items) + len(batch))
                self.failing = type(exc).__name__
                await asyncio.sleep(wait)
                wait = min(wait * 2, RETRY_SECONDS[1])
                continue
            if self.failing is not None:
                log.info("audit_sink_recovered", sink=self.sink.name)
                self.failing = None
            return

    @property
    def idle(self) -> bool:
        return not self.pipe.items and not self.holding


class AuditTrail:
    """The process's audit trail: built once at start, kept by every reload, closed at the end."""

    def __init__(self, *, maker: RecordMaker, chain: Chain, sinks: Sequence[Sink], queue_size: int, policy: str,
                 on_dropped: Dropped, clock: Callable[[], float] = time.time) -> None:
        self.maker, self.chain, self.clock = maker, chain, clock
        self.block = policy == "block"
        self.on_dropped = on_dropped
        self.entries = Pipe[Entry | tuple[Any, ...] | dict[str, Any]](queue_size)
        self.workers = [SinkWorker(sink, queue_size) for sink in sinks]
        self._tasks: list[asyncio.Task[None]] = []
        self._writing = False
        self._nap: asyncio.Future[None] | None = None  # the writer's pause between batches
        self._enough = max(1, queue_size // 2)  # queued records that end the pause early

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._write(), name="audit-writer"),
                       *(asyncio.create_task(w.run(), name=f"audit-{w.sink.name}") for w in self.workers)]

    def call(self, started: float, method: str, request: Any, reply: Any, ctx: Any) -> Awaitable[None] | None:
        """On the request path, a request's reply made (`started`: its perf_counter at the start): queue its
        `Entry` (a plain tuple, made and queued here in few steps), as `hand` says. `ctx`: its RequestContext,
        read here, never held."""
        item = (time.time(), time.perf_counter() - started, method, request, reply, ctx.principal, ctx.request_id,
                ctx.traceparent, ctx.client, ctx.envelope, ctx.protocol_version, ctx.target, ctx.backend, ctx.outcome,
                ctx.extra or None, ctx.size)
        entries = self.entries
        if len(entries.items) >= self._enough:  # half full: `hand` wakes the writer, and blocks or drops when full
            return self.hand(item)
        entries.items.append(item)
        if entries.waiter is not None:
            entries.wake()
        return None

    async def refused(self, request: dict[str, Any], reply: dict[str, Any], outcome: str, *, principal: Any,
                      request_id: str, traceparent: str | None, ctx: Any, envelope: Any,
                      decision: dict[str, str] | None) -> None:
        """A request refused before it reached the dispatcher, its caller authenticated (HTTP 403 or 429, a batch
        member over a budget): its record, from what the request says and its context if it had one yet
        (`envelope`: the 2026 envelope its `_meta` names, when it had no context). No duration: it was not run."""
        client, version, size = (ctx.client, ctx.protocol_version, ctx.size) if ctx is not None else (None, None, 0)
        if ctx is not None:
            envelope = ctx.envelope
        elif envelope is not None:
            version = envelope.protocol_version
        waiting = self.hand((time.time(), None, request["method"], request, reply, principal, request_id, traceparent,
                             client, envelope, version, None, None, outcome, decision, size))
        if waiting is not None:
            await waiting

    def hand(self, handed: Entry | dict[str, Any]) -> Awaitable[None] | None:
        """On the request path: queue a record to be. None when queued; else, with `block`, what to await
        until it is (with `drop`, None: it was counted as dropped for every sink)."""
        if self.entries.offer(handed):
            if self._nap is not None and len(self.entries.items) >= self._enough:
                _wake(self._nap)  # half full: write now rather than make callers wait or drop
            return None
        if self.block:
            return self.entries.put(handed)
        for worker in self.workers:
            self.on_dropped(worker.sink.name, 1)
        return None

    async def admin(self, action: str, *, tenant: str | None, subject: str | None, request_id: str | None,
                    outcome: str, detail: dict[str, Any] | None = None) -> None:
        """Record an admin action (reload, catalogue refresh)."""
        waiting = self.hand(admin_record(self.clock(), action, tenant=tenant, subject=subject,
                                         request_id=request_id, outcome=outcome, detail=detail))
        if waiting is not None:
            await waiting

    async def _write(self) -> None:
        while True:
            batch = await self.entries.take()
            self._writing = True
            lines = self._seal(batch)
            for worker in self.workers:
                await self._pass(worker, lines)
            self._writing = False
            await self._gather()

    async def _gather(self) -> None:
        """Let records gather for GATHER_SECONDS (a wake-up and a write per call cost more), or until the
        queue is half full."""
        loop = asyncio.get_running_loop()
        nap = self._nap = loop.create_future()
        timer = loop.call_later(GATHER_SECONDS, _wake, nap)
        try:
            await nap
        finally:
            timer.cancel()
            self._nap = None

    def _seal(self, batch: list[Entry | dict[str, Any]]) -> list[bytes]:
        """The batch's lines, in order (a record that fails is left out, said loudly)."""
        lines, line, seal = [], self.maker.line, self.chain.seal
        for item in batch:
            try:
                lines.append(seal(item) if type(item) is dict else line(item))  # else: an Entry's plain tuple
            except Exception:  # a bug, never the caller's input: said loudly, and the trail goes on
                log.exception("audit_record_failed")
        return lines

    async def _pass(self, worker: SinkWorker, lines: list[bytes]) -> None:
        """Queue the lines for one sink: all at once while there is room (the usual case), else one by one."""
        pipe = worker.pipe
        if len(pipe.items) + len(lines) <= pipe.size:
            pipe.extend(lines)
            return
        for index, line in enumerate(lines):
            if pipe.offer(line):
                continue
            if not self.block:
                self.on_dropped(worker.sink.name, len(lines) - index)  # the queue stays full for the rest
                return
            await pipe.put(line)

    async def readiness(self) -> str | None:
        """For /readyz when `audit.required`: None while every sink writes, else which fails."""
        failing = [f"{w.sink.name} failing ({w.failing})" for w in self.workers if w.failing is not None]
        return ", ".join(failing) or None

    async def close(self, seconds: float = CLOSE_SECONDS) -> None:
        """Let queued records reach their sinks (within `seconds`), then stop and close the sinks."""
        deadline = time.monotonic() + seconds
        # polled: "drained" spans every task's queue and write, and a stop waits once, briefly
        while time.monotonic() < deadline and not self._drained():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        for task in self._tasks:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
        for worker in self.workers:
            with suppress(Exception):
                await worker.sink.close()

    def _drained(self) -> bool:
        return not self.entries.items and not self._writing and all(w.idle for w in self.workers)


def _wake(nap: asyncio.Future[None]) -> None:
    if not nap.done():
        nap.set_result(None)
