"""A closed-loop MCP load generator: aiohttp client, raw JSON-RPC, every reply checked.

Each virtual user (VU) is one MCP client: its own connection (so a session stays on one
gateway worker even when sessions are not shared), its own handshake (`initialize` +
`notifications/initialized`, keeping `Mcp-Session-Id`, sending `MCP-Protocol-Version` and
`Authorization` when given), then requests back to back until the run's count is used up.
At protocol version 2026-07-28 there is no handshake and no session: each request carries
the envelope and the routing headers instead (`bench.stateless`).

Operations:
- `echo`: `tools/call` on a stub echo tool with a unique per-request value; the reply must
  echo exactly those arguments (as `structuredContent` and as JSON text content).
- `add`: `tools/call add` on the SDK calc backend; `structuredContent.result` must be a + b.
- `list`: `tools/list`, following `nextCursor` to the end (one operation = the whole listing);
  the names must be exactly the expected ones (a page byte-identical to one already
  decoded and checked is not decoded again: see `VirtualUser._list_page`).

Several processes (`processes`) each run their share of the VUs on their own event loop,
start together at a barrier, and return raw latency samples, merged into one result.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from bench.replies import CheckFailed, check_call, decode, expect_result, request
from bench.stateless import enveloped, is_stateless, routing_headers

PROTOCOL_VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
MAX_ERROR_SAMPLES = 5
BARRIER_TIMEOUT = 60.0
OPS = ("echo", "add", "list", "read", "prompt")
"""tools/call of the echo or add tools, a full tools/list, resources/read, prompts/get."""


@dataclass(frozen=True, slots=True)
class ClientProfile:
    """What one VU sends: its token (None: no Authorization) and the tools it calls in turn (for
    `read`: the URI prefixes it reads under; for `prompt`: the prompts it gets)."""

    token: str | None = None
    tools: tuple[str, ...] = ("echo_0",)


@dataclass(frozen=True, slots=True)
class LoadSpec:
    url: str
    op: str
    requests: int
    concurrency: int
    processes: int = 1
    profiles: tuple[ClientProfile, ...] = (ClientProfile(),)
    expect_tools: frozenset[str] = frozenset()  # `list`: the exact names a full listing returns
    warmup: int = 2  # untimed (but checked) operations per VU before the barrier
    timeout: float = 30.0
    protocol_version: str = PROTOCOL_VERSION

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"op must be one of {OPS}")
        if self.requests < 1 or self.concurrency < 1 or self.processes < 1:
            raise ValueError("requests, concurrency and processes must be at least 1")
        if self.processes > self.concurrency:
            raise ValueError("processes must not exceed concurrency (each process runs at least one VU)")


@dataclass(slots=True)
class LoadResult:
    requests: int = 0  # timed operations that completed (right or wrong)
    errors: int = 0
    http_requests: int = 0  # `list` with pages sends several per operation
    started: float = float("inf")
    ended: float = 0.0
    latencies: list[float] = field(default_factory=list)  # seconds, successful operations only
    error_samples: list[str] = field(default_factory=list)

    def fail(self, what: str) -> None:
        self.errors += 1
        if len(self.error_samples) < MAX_ERROR_SAMPLES:
            self.error_samples.append(what[:300])

    def merge(self, other: LoadResult) -> None:
        self.requests += other.requests
        self.errors += other.errors
        self.http_requests += other.http_requests
        self.started = min(self.started, other.started)
        self.ended = max(self.ended, other.ended)
        self.latencies.extend(other.latencies)
        self.error_samples.extend(other.error_samples[: MAX_ERROR_SAMPLES - len(self.error_samples)])

    def summary(self) -> dict[str, Any]:
        """Counts, rps over the whole timed window, and latency percentiles in ms."""
        duration = max(self.ended - self.started, 1e-9)
        samples = sorted(self.latencies)
        out: dict[str, Any] = {"requests": self.requests, "errors": self.errors, "rps": self.requests / duration}
        for name, q in (("p50_ms", 0.50), ("p90_ms", 0.90), ("p99_ms", 0.99), ("max_ms", 1.0)):
            out[name] = percentile(samples, q) * 1000
        if self.error_samples:
            out["error_samples"] = list(self.error_samples)
        return out


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile of sorted samples (0 when there are none)."""
    if not samples:
        return 0.0
    rank = min(len(samples) - 1, max(0, int(q * len(samples) + 0.999999) - 1))
    return samples[rank]


# ---------------------------------------------------------------- running


def run_load(spec: LoadSpec) -> LoadResult:
    """Run `spec` to completion (in this process, or in `spec.processes` forked ones)."""
    if spec.processes == 1:
        return _run_in_loop(spec, 0, None)
    return _run_processes(spec)


def _run_in_loop(spec: LoadSpec, part: int, barrier: Any) -> LoadResult:
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(_run_part(spec, part, barrier))


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return None
    return uvloop.new_event_loop


def _run_processes(spec: LoadSpec) -> LoadResult:
    # fork: the children inherit the spec and start at once (the caller has no running loop).
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(spec.processes)
    queue = context.Queue()
    children = [context.Process(target=_child, args=(spec, part, barrier, queue), daemon=True)
                for part in range(spec.processes)]
    for child in children:
        child.start()
    merged = LoadResult()
    try:
        for _ in children:
            merged.merge(queue.get(timeout=_deadline(spec)))
    except Exception as exc:  # queue.Empty, or a child that died: report, do not hang
        merged.fail(f"load process lost: {type(exc).__name__}")
    finally:
        for child in children:
            child.join(timeout=5)
            if child.is_alive():
                child.kill()
    return merged


def _deadline(spec: LoadSpec) -> float:
    """How long a whole run may take: generous, but bounded."""
    return BARRIER_TIMEOUT + spec.timeout * 4 + spec.requests * 0.05


def _child(spec: LoadSpec, part: int, barrier: Any, queue: Any) -> None:
    try:
        result = _run_in_loop(spec, part, barrier)
    except Exception as exc:
        result = LoadResult()
        result.fail(f"load process {part} failed: {type(exc).__name__}: {exc}")
    queue.put(result)


def _share(total: int, parts: int, part: int) -> int:
    """Part `part`'s share of `total` split as evenly as possible."""
    return total // parts + (1 if part < total % parts else 0)


async def _run_part(spec: LoadSpec, part: int, barrier: Any) -> LoadResult:
    vus = _share(spec.concurrency, spec.processes, part)
    first_vu = sum(_share(spec.concurrency, spec.processes, p) for p in range(part))
    budget = iter(range(_share(spec.requests, spec.processes, part)))
    nonce = f"{secrets.token_hex(4)}-{part}"
    result = LoadResult()
    users = [VirtualUser(spec, spec.profiles[(first_vu + i) % len(spec.profiles)], f"{nonce}-{i}", result)
             for i in range(vus)]
    try:
        await asyncio.gather(*(user.prepare() for user in users))
        await asyncio.to_thread(_wait_barrier, barrier)
        result.started = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes
        await asyncio.gather(*(user.run(budget) for user in users))
        result.ended = time.perf_counter()
    finally:
        await asyncio.gather(*(user.close() for user in users))
    return result


def sessions_probe(spec: LoadSpec, connections: int) -> LoadResult:
    """Handshake once, then call once on each of `connections` new connections with that session.

    Behind `--workers N` (SO_REUSEPORT) new connections land on any worker, so errors here
    mean a session is known only to the worker that created it.
    """

    async def probe() -> LoadResult:
        result = LoadResult()
        first = VirtualUser(spec, spec.profiles[0], "probe", result)
        await first.prepare()
        await first.close()
        for n in range(connections):
            other = VirtualUser(spec, spec.profiles[0], f"probe-{n}", result)
            other.session_id, other.ok = first.session_id, True
            await other.run(iter(range(1)))
            await other.close()
        return result

    return asyncio.run(probe())


def _wait_barrier(barrier: Any) -> None:
    if barrier is not None:
        barrier.wait(BARRIER_TIMEOUT)


# ---------------------------------------------------------------- one virtual user


class VirtualUser:
    """One MCP client with its own connection and session."""

    def __init__(self, spec: LoadSpec, profile: ClientProfile, nonce: str, result: LoadResult) -> None:
        self.spec = spec
        self.profile = profile
        self.nonce = nonce
        self.result = result
        self.session_id: str | None = None
        self.stateless = is_stateless(spec.protocol_version)
        self.ids = itertools.count(1)
        self.pages: dict[str | None, tuple[bytes, tuple[str, ...], str | None]] = {}  # see _list_page
        # One connection per VU: it pins the MCP session to one server process (see module doc).
        self.http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1),
                                          timeout=aiohttp.ClientTimeout(total=spec.timeout))
        self.ok = False

    async def close(self) -> None:
        await self.http.close()

    async def prepare(self) -> None:
        """Handshake, then a few checked warm-up operations (connections, caches, JIT-free paths)."""
        try:
            await self._handshake()
            for _ in range(self.spec.warmup):
                await self._operation(-1)
            self.ok = True
        except Exception as exc:
            self.result.fail(f"handshake/warm-up: {type(exc).__name__}: {exc}")

    async def run(self, budget: Any) -> None:
        if not self.ok:
            return  # the other VUs take over this one's share of the budget
        for index in budget:
            started = time.perf_counter()
            try:
                await self._operation(index)
            except Exception as exc:
                self.result.requests += 1
                self.result.fail(f"{type(exc).__name__}: {exc}")
                continue
            self.result.latencies.append(time.perf_counter() - started)
            self.result.requests += 1

    def _headers(self, message: dict[str, Any]) -> dict[str, str]:
        headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        if self.profile.token:
            headers["Authorization"] = f"Bearer {self.profile.token}"
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
            headers["MCP-Protocol-Version"] = self.spec.protocol_version
        elif self.stateless:
            headers.update(routing_headers(message, self.spec.protocol_version))
        return headers

    async def _handshake(self) -> None:
        if self.stateless:
            return  # 2026-07-28: every request stands alone
        params = {"protocolVersion": self.spec.protocol_version, "capabilities": {},
                  "clientInfo": {"name": "bench-loadgen", "version": "1.0.0"}}
        reply, headers = await self._post(request(0, "initialize", params))
        expect_result(reply, 0)
        self.session_id = headers.get("Mcp-Session-Id")
        if not self.session_id:
            raise CheckFailed("initialize gave no Mcp-Session-Id")
        status, _ = await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if status != 202:
            raise CheckFailed(f"notifications/initialized got HTTP {status}")

    async def _operation(self, index: int) -> None:
        if self.spec.op == "list":
            await self._list_all()
            return
        tool = self.profile.tools[index % len(self.profile.tools)]
        message_id = next(self.ids)
        if self.spec.op in ("read", "prompt"):
            await self._read_or_prompt(tool, message_id, f"{self.nonce}-{index}-{message_id}")
            return
        if self.spec.op == "echo":
            arguments: dict[str, Any] = {"value": f"{self.nonce}-{index}-{message_id}", "n": index}
        else:
            arguments = {"a": index, "b": 0.25}  # a + b is exact in binary floating point
        reply, _ = await self._post(request(message_id, "tools/call", {"name": tool, "arguments": arguments}))
        check_call(self.spec.op, expect_result(reply, message_id), arguments)

    async def _read_or_prompt(self, target: str, message_id: int, value: str) -> None:
        """resources/read of `<target><value>`, or prompts/get of `target`: either answers with `value`."""
        if self.spec.op == "read":
            reply, _ = await self._post(request(message_id, "resources/read", {"uri": target + value}))
            content = expect_result(reply, message_id)["contents"][0]
            if content != {"uri": target + value, "mimeType": "text/plain", "text": value}:
                raise CheckFailed(f"resources/read gave {content}")
            return
        params = {"name": target, "arguments": {"value": value}}
        reply, _ = await self._post(request(message_id, "prompts/get", params))
        if expect_result(reply, message_id)["messages"][0]["content"].get("text") != value:
            raise CheckFailed("prompts/get text differs from the value")

    async def _list_all(self) -> None:
        names: list[str] = []
        cursor: str | None = None
        while True:
            message_id = next(self.ids)
            page_names, cursor = await self._list_page(message_id, cursor)
            names.extend(page_names)
            if not cursor:
                break
        if len(names) != len(self.spec.expect_tools) or set(names) != self.spec.expect_tools:
            raise CheckFailed(f"tools/list gave {len(names)} tools, expected {len(self.spec.expect_tools)}")

    async def _list_page(self, message_id: int, cursor: str | None) -> tuple[tuple[str, ...], str | None]:
        """One page's names and next cursor.

        Decoding a 300 kB catalogue costs the client more than the gateway spends serving
        it, so a reply whose result is byte-identical to one this VU already decoded and
        checked, after an envelope carrying our own id, is accepted without decoding again.
        """
        status, (body, content_type, _) = await self._send(
            request(message_id, "tools/list", {"cursor": cursor} if cursor else None))
        if status != 200:
            raise CheckFailed(f"HTTP {status}: {body[:200]!r}")
        envelope = b'{"jsonrpc":"2.0","id":%d,"result":' % message_id
        raw = body[len(envelope) : -1] if body.startswith(envelope) and body.endswith(b"}") else None
        known = self.pages.get(cursor)
        if raw is not None and known is not None and known[0] == raw:
            return known[1], known[2]
        result = expect_result(decode(body, content_type, message_id), message_id)
        page = tuple(tool["name"] for tool in result["tools"]), result.get("nextCursor")
        if raw is not None:
            self.pages[cursor] = (raw, *page)
        return page

    async def _post(self, message: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        status, response = await self._send(message)
        body, content_type, headers = response
        if status != 200:
            raise CheckFailed(f"HTTP {status}: {body[:200]!r}")
        return decode(body, content_type, message["id"]), headers

    async def _send(self, message: dict[str, Any]) -> tuple[int, tuple[bytes, str, Any]]:
        self.result.http_requests += 1
        body = orjson.dumps(enveloped(message, self.spec.protocol_version) if self.stateless else message)
        async with self.http.post(self.spec.url, data=body, headers=self._headers(message)) as response:
            raw = await response.read()
            return response.status, (raw, response.content_type, response.headers)
