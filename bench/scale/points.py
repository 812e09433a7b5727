"""One point of each curve: set the estate up, serve it, measure, stop everything it started.

Also the instruction count of a tools/call at an estate (bench.instructions' method: the gateway
under callgrind, counting switched on only around the measured calls).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.instructions import STARTUP_TIMEOUT, callgrind_wrapper, count_per_call
from bench.procs import ProcessSet
from bench.scale.client import Client, run
from bench.scale.curves import (
    Reps,
    Setup,
    backends_setup,
    call_ms,
    open_sessions,
    session_call_ms,
    sessions_setup,
    stdio_setup,
    tenants_probes,
    tenants_setup,
    tools_probes,
    tools_setup,
)
from bench.scale.estate import Served, serve
from bench.scenarios import redis_keys_note


@dataclass
class Context:
    procs: ProcessSet
    reps: Reps
    bare_s: float  # spawn to ready of a gateway without backends
    notes: list[str]


Measure = Callable[[Served, Setup], dict[str, float]]


def _served(ctx: Context, setup: Setup, name: str, measure: Measure) -> dict[str, float]:
    """Serve `setup`, measure, then stop the gateway and the stubs whatever happens."""
    served = None
    try:
        served = serve(ctx.procs, setup.estate, setup.complete, name=name)
        values = {"ready_s": served.gateway.ready_seconds, "complete_s": served.complete_s,
                  "rss_ready_mib": served.rss_mib()}
        return values | measure(served, setup)
    finally:
        if served is not None:
            ctx.procs.stop(served.gateway.managed)
        setup.stop(ctx.procs)
        _forget_redis(ctx, setup)


def _forget_redis(ctx: Context, setup: Setup) -> None:
    store = setup.estate.store
    if store and store.get("redis_url"):
        ctx.notes.append(redis_keys_note(store["key_prefix"]))


def _reloads(served: Served, count: int) -> float:
    return statistics.median(served.reload_s() for _ in range(count))


def tools_point(ctx: Context, size: int) -> dict[str, float]:
    def measure(served: Served, setup: Setup) -> dict[str, float]:
        values = run(tools_probes(served, setup, ctx.reps))
        return values | {"build_s": served.complete_s - ctx.bare_s, "rss_mib": served.rss_mib()}

    return _served(ctx, tools_setup(ctx.procs, size), f"gw-tools{size}", measure)


def backends_point(ctx: Context, size: int, stdio: bool = False) -> dict[str, float]:
    def measure(served: Served, setup: Setup) -> dict[str, float]:
        values = {"reload_s": _reloads(served, ctx.reps.reloads), "rss_mib": served.rss_mib()}
        values["refresh_s"], cpu = served.refresh()
        values["refresh_cpu_ms"] = cpu * 1000
        if setup.backend is not None:
            values["call_ms"] = _session_free_call(served, setup, ctx.reps)
        return values

    setup = stdio_setup(ctx.procs, size) if stdio else backends_setup(ctx.procs, size)
    return _served(ctx, setup, f"gw-backends{size}", measure)


def _session_free_call(served: Served, setup: Setup, reps: Reps) -> float:
    async def probe() -> float:
        assert setup.backend is not None
        async with Client(served.url) as client:
            return await call_ms(client, setup.backend, reps.requests)

    return float(run(probe()))


def tenants_point(ctx: Context, size: int) -> dict[str, float]:
    def measure(served: Served, setup: Setup) -> dict[str, float]:
        values = run(tenants_probes(served, setup, ctx.reps))
        values["rss_mib"] = served.rss_mib()  # every tenant's view built
        return values | {"reload_s": _reloads(served, ctx.reps.reloads)}

    return _served(ctx, tenants_setup(ctx.procs, size), f"gw-tenants{size}", measure)


def sessions_point(ctx: Context, size: int, redis: bool = False) -> dict[str, float]:
    def measure(served: Served, setup: Setup) -> dict[str, float]:
        before = served.rss_mib()
        started = time.perf_counter()
        sessions = run(open_sessions(served.url, size))
        opened_s = time.perf_counter() - started
        after = served.rss_mib()
        return {"open_s": opened_s, "rss_mib": after, "kib_per_session": (after - before) * 1024 / size,
                "call_ms": run(session_call_ms(served, setup, sessions, ctx.reps))}

    return _served(ctx, sessions_setup(ctx.procs, size, redis), f"gw-sessions{size}", measure)


def instructions(ctx: Context, setup: Setup, calls: int, name: str) -> float:
    """Instructions per tools/call of the gateway serving `setup` (after opening its sessions)."""
    out = ctx.procs.workdir / f"{name}.callgrind"
    served = None
    try:
        served = serve(ctx.procs, setup.estate, setup.complete, name=name, wrapper=callgrind_wrapper(out),
                       timeout=STARTUP_TIMEOUT)
        if setup.sessions:
            run(open_sessions(served.url, setup.sessions))
        assert setup.backend is not None
        return count_per_call(served.gateway.managed, out, served.url, setup.backend, calls, "echo",
                              via_gateway=True)
    finally:
        if served is not None:
            ctx.procs.stop(served.gateway.managed)
        setup.stop(ctx.procs)
        for dump in Path(out.parent).glob(out.name + "*"):
            dump.unlink(missing_ok=True)


SETUPS: dict[str, Callable[[ProcessSet, int], Setup]] = {
    "tools": tools_setup, "backends": backends_setup, "tenants": tenants_setup, "sessions": sessions_setup,
}
POINTS: dict[str, Callable[[Context, int], dict[str, Any]]] = {
    "tools": tools_point, "backends": backends_point, "tenants": tenants_point, "sessions": sessions_point,
}
