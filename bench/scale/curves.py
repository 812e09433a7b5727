"""The four estates that grow (tools, backends, tenants, sessions), one gateway process per point.

Each curve has a `setup` (start the stubs, describe the estate) shared by its timed points and its
instruction counts, so both measure the same estate.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from dataclasses import dataclass, field
from typing import Any

from bench.harness import Backend, start_stub
from bench.procs import Managed, ProcessSet
from bench.replies import CheckFailed
from bench.scale.client import Client, median, timed
from bench.scale.estate import Complete, Estate, Served, tool_count
from bench.scenarios import REDIS_URL

FINDER = "finder"
"""The tenant in `discovery: search` mode of the tools curve."""
STUB_PAGE = 1000
"""The stubs' own tools/list page: big estates reach the gateway in pages, as real servers send them."""
TOOLS_PER_BACKEND = 20
WIDE_BACKENDS, WIDE_TOOLS = 10, 100
SESSION_TOOLS = 10
OPEN_CONCURRENCY = 16
STDIO_COMMAND = [sys.executable, "-m", "gateway.demo.calc"]


@dataclass
class Setup:
    """An estate ready to serve: what `complete` looks like, the backend calls go to, the stubs to stop."""

    estate: Estate
    complete: Complete
    backend: Backend | None
    stubs: list[Managed] = field(default_factory=list)
    sessions: int = 0  # handshake-era sessions to open before measuring

    def stop(self, procs: ProcessSet) -> None:
        for stub in self.stubs:
            procs.stop(stub)


# ---------------------------------------------------------------- setups


def tools_setup(procs: ProcessSet, tools: int) -> Setup:
    stub = start_stub(procs, tools=tools, name="t", page_size=STUB_PAGE)
    finder = {"backends": ["*"], "discovery": "search"}
    return Setup(Estate(list(stub.backends), tenants={FINDER: finder}), tool_count(tools), stub.backends[0],
                 [stub.managed])


def backends_setup(procs: ProcessSet, count: int) -> Setup:
    stub = start_stub(procs, tools=TOOLS_PER_BACKEND, count=count, name="b")
    return Setup(Estate(list(stub.backends)), tool_count(count * TOOLS_PER_BACKEND), stub.backends[0], [stub.managed])


def stdio_setup(procs: ProcessSet, count: int) -> Setup:
    """`count` stdio children (the SDK demo calc server): what a child process costs the gateway."""
    names = [f"calc{i}" for i in range(count)]
    stdio = [{"name": name, "transport": "stdio", "command": STDIO_COMMAND, "timeout_seconds": 30} for name in names]
    return Setup(Estate([], stdio=stdio), _all_namespaces(names), None)


def _all_namespaces(names: list[str]) -> Complete:
    return lambda tools: {tool.split("__", 1)[0] for tool in tools} >= set(names)


def tenant_views(wide: tuple[Backend, ...], count: int) -> dict[str, dict[str, Any]]:
    """Tenant t<i> sees every tool but one of its own, so no two of the views are equal."""
    def denied(i: int) -> str:
        backend = wide[i % len(wide)]
        return backend.exposed(backend.tools[(i // len(wide)) % len(backend.tools)])

    return {f"t{i}": {"backends": ["*"], "tools": {"allow": ["*"], "deny": [denied(i)]}} for i in range(count)}


def tenants_setup(procs: ProcessSet, count: int) -> Setup:
    stub = start_stub(procs, tools=WIDE_TOOLS, count=WIDE_BACKENDS, name="w")
    wide = stub.backends
    return Setup(Estate(list(wide), tenants=tenant_views(wide, count)), tool_count(WIDE_BACKENDS * WIDE_TOOLS),
                 wide[0], [stub.managed])


def sessions_setup(procs: ProcessSet, sessions: int, redis: bool = False) -> Setup:
    stub = start_stub(procs, tools=SESSION_TOOLS, name="s")
    store = {"redis_url": REDIS_URL, "key_prefix": f"mcpgw-scale-{secrets.token_hex(4)}:"} if redis else None
    return Setup(Estate(list(stub.backends), store=store, sessions=sessions), tool_count(SESSION_TOOLS),
                 stub.backends[0], [stub.managed], sessions)


# ---------------------------------------------------------------- probes


@dataclass(frozen=True, slots=True)
class Reps:
    """How many times each probe runs (medians reported)."""

    requests: int = 30  # first pages, find_tools, tools/call
    drains: int = 5  # full tools/list drains (fewer for the largest catalogues)
    reloads: int = 3
    first_lists: int = 20  # tenants whose first listing is timed


async def call_ms(client: Client, backend: Backend, count: int, token: str | None = None,
                  session: str | None = None) -> float:
    """Median ms of a tools/call on the backend's first echo tools (each reply checked)."""
    async def call(i: int) -> None:
        arguments = {"value": f"scale-{i}", "n": i}
        tool = backend.exposed(backend.tools[1 + i % 3])  # tools[0] is hidden from tenant t0
        result = await client.ask("tools/call", {"name": tool, "arguments": arguments}, token=token, session=session)
        if result.get("structuredContent") != arguments:
            raise CheckFailed(f"tools/call {tool} gave {result}")

    return median(await timed(call, count))


async def tools_probes(served: Served, setup: Setup, reps: Reps) -> dict[str, float]:
    assert setup.backend is not None
    size = len(setup.backend.tools)
    async with Client(served.url) as client:
        first = await timed(lambda i: client.ask("tools/list"), reps.requests)
        drains = await timed(lambda i: _drain(client, size), max(1, min(reps.drains, 50_000 // size)))
        find_first = await timed(lambda i: _find(client, _selective(size, i)), 1)  # the first search of a view
        find = await timed(lambda i: _find(client, _selective(size, i + 1)), reps.requests)
        broad = await timed(lambda i: _find(client, f"echo tool number {i}"), max(1, reps.requests // 3))
        calls = await call_ms(client, setup.backend, reps.requests)
    return {"first_page_ms": median(first), "drain_ms": median(drains), "find_first_ms": find_first[0],
            "find_ms": median(find), "find_broad_ms": median(broad), "call_ms": calls}


def _selective(size: int, i: int) -> str:
    """A query that one tool matches (its number), as a specific request matches few real tools; every
    stub tool has the words of the broad query, so that one ranks the whole view."""
    return str((i * 7919) % size)


async def _drain(client: Client, size: int) -> None:
    names = await client.list_all()
    if len(names) != size:
        raise CheckFailed(f"tools/list gave {len(names)} tools, expected {size}")


async def _find(client: Client, query: str) -> None:
    result = await client.ask("tools/call", {"name": "find_tools", "arguments": {"query": query}}, token=FINDER)
    if result.get("isError") or not result.get("structuredContent", {}).get("tools"):
        raise CheckFailed(f"find_tools {query!r} gave {str(result)[:200]}")


async def tenants_probes(served: Served, setup: Setup, reps: Reps) -> dict[str, float]:
    """First full listing of fresh tenants, a cached one, then every tenant's first page (all views built)."""
    assert setup.backend is not None
    tenants = list(setup.estate.tenants)
    expected = WIDE_BACKENDS * WIDE_TOOLS - 1
    async with Client(served.url) as client:
        sample = tenants[: reps.first_lists]
        first = await timed(lambda i: _tenant_drain(client, sample[i], expected), len(sample))
        again = await timed(lambda i: _tenant_drain(client, sample[i], expected), len(sample))
        views = await timed(lambda i: client.ask("tools/list", token=tenants[i]), len(tenants))
        calls = await call_ms(client, setup.backend, reps.requests, token=tenants[0])
    return {"first_list_ms": median(first), "cached_list_ms": median(again), "all_views_s": sum(views) / 1000,
            "call_ms": calls}


async def _tenant_drain(client: Client, tenant: str, expected: int) -> None:
    names = await client.list_all(token=tenant)
    if len(names) != expected:
        raise CheckFailed(f"tenant {tenant}: tools/list gave {len(names)} tools, expected {expected}")


async def open_sessions(url: str, count: int) -> list[str]:
    """`count` handshake-era sessions, opened a few at a time."""
    async with Client(url, connections=OPEN_CONCURRENCY) as client:
        opened: list[str] = []
        for start in range(0, count, OPEN_CONCURRENCY * 8):
            batch = range(start, min(count, start + OPEN_CONCURRENCY * 8))
            opened += await asyncio.gather(*(client.open_session() for _ in batch))
        return opened


async def session_call_ms(served: Served, setup: Setup, sessions: list[str], reps: Reps) -> float:
    assert setup.backend is not None
    async with Client(served.url) as client:
        return await call_ms(client, setup.backend, reps.requests, session=sessions[-1])



