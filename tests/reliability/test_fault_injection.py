"""Fault injection under steady load: kill one backend, hang one, make one talk garbage, then restore all.

Backends: the demo SDK servers over HTTP (calc stays healthy, notes is killed, clock is
frozen with SIGSTOP), calc again as a stdio child (healthy), and the misbehaving aiohttp
backend (switched to garbage). Two client loops per backend call it throughout. Expected:
healthy backends never see an error; affected calls fail with their reason, then fast with
`circuit_open` once the breaker opens; within one cool-down of the restoration every circuit
is closed and every call succeeds; no task, socket or child process is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from backend_fixtures import StartBackend, stdio_command
from conftest import (
    API_KEY,
    RawClient,
    RunningGateway,
    StartGateway,
    http_backend_config,
    make_config,
    make_token,
)

from gateway import keys
from reliability.conftest import RunningMisbehaving, child_pids, live_tasks, socket_fds

pytestmark = pytest.mark.timeout(300)

COOLDOWN = 1.0
HANG_TIMEOUT = 2.0
RECOVERY_SLACK = 3.0  # a busy 2-core machine: the probe itself, a re-handshake, a restarted process
FAST = 1.0            # "fail fast": well under HANG_TIMEOUT, generous for a loaded machine
LOOPS_PER_BACKEND = 2
CIRCUIT = {"failures": 3, "cooldown_seconds": COOLDOWN}
CALLS = {  # backend -> (tool, arguments, expected structuredContent or None to skip the check)
    "calc": ("calc__add", {"a": 1, "b": 2}, {"result": 3.0}),
    "calcs": ("calcs__add", {"a": 2, "b": 3}, {"result": 5.0}),
    "notes": ("notes__list_notes", {}, None),
    "clock": ("clock__now", {}, None),
    "flaky": ("flaky__echo", {"x": 1}, {"x": 1}),
}
HEALTHY = ("calc", "calcs")
FAULT_REASONS = {"notes": {"unavailable"}, "clock": {"timeout"}, "flaky": {"bad_response"}}


@dataclass(frozen=True)
class Result:
    backend: str
    started: float
    seconds: float
    reason: str | None  # None: the call succeeded with the expected content


class Load:
    """LOOPS_PER_BACKEND client loops per backend, each with its own MCP session, calling until stopped."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.results: list[Result] = []
        self._stop = asyncio.Event()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Load]:
        async with aiohttp.ClientSession() as session:
            clients = [(b, RawClient(session, self.url, make_token("acme"))) for b in CALLS
                       for _ in range(LOOPS_PER_BACKEND)]
            await asyncio.gather(*(client.initialize() for _, client in clients))
            self._stop.clear()
            loops = [asyncio.create_task(self._loop(b, client)) for b, client in clients]
            try:
                yield self
            finally:
                self._stop.set()
                await asyncio.gather(*loops)

    async def _loop(self, backend: str, client: RawClient) -> None:
        tool, arguments, expected = CALLS[backend]
        while not self._stop.is_set():
            started = time.monotonic()
            body = await client.call("tools/call", {"name": tool, "arguments": arguments})
            self.results.append(Result(backend, started, time.monotonic() - started, _reason(body, expected)))
            await asyncio.sleep(0.02)

    def of(self, backend: str, after: float = 0.0, before: float = float("inf")) -> list[Result]:
        """Results of `backend` ("" for all) whose call started in [after, before)."""
        return [r for r in self.results if backend in ("", r.backend) and after <= r.started < before]


def _reason(body: dict[str, Any], expected: Any) -> str | None:
    if "error" in body:
        return str(body["error"].get("data", {}).get("reason", body["error"]))
    result = body["result"]
    if result.get("isError") or (expected is not None and result.get("structuredContent") != expected):
        return f"wrong result: {result}"
    return None


async def wait_for(condition: Any, seconds: float) -> float:
    """Poll `condition()` until true; return when it became true (monotonic), or fail."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)
    return time.monotonic()


def circuits(running: RunningGateway) -> dict[str, str]:
    return {b: running.app[keys.POOL].get(b).circuit_state for b in CALLS}


async def admin_circuits(running: RunningGateway) -> dict[str, str]:
    async with aiohttp.ClientSession() as session, session.get(
        running.base + "admin/backends", headers={"Authorization": f"Bearer {API_KEY}"}
    ) as response:
        rows = (await response.json())["backends"]
    return {row["name"]: row["circuit"] for row in rows}


async def quiet_counts(baseline: tuple[int, int] | None = None, tolerance: int = 0) -> tuple[int, int]:
    """(tasks, sockets) once they settle (at most 15 s; in-flight cancel notices may still be ending)."""
    deadline = time.monotonic() + 15
    while True:
        await asyncio.sleep(0.25)
        counts = (live_tasks(), socket_fds())
        settled = baseline is None or all(c <= b + tolerance for c, b in zip(counts, baseline, strict=True))
        if settled or time.monotonic() > deadline:
            return counts


async def test_faults_under_load_stay_contained_and_everything_recovers(
    http_backend: StartBackend, misbehaving: RunningMisbehaving, gateway: StartGateway
) -> None:
    calc, notes, clock = await asyncio.gather(http_backend("calc"), http_backend("notes"), http_backend("clock"))
    limits = {"circuit": CIRCUIT, "timeout_seconds": HANG_TIMEOUT}
    config = make_config([
        http_backend_config("calc", calc.url, timeout_seconds=20),
        {"name": "calcs", "transport": "stdio", "command": stdio_command("calc"), "timeout_seconds": 20},
        http_backend_config("notes", notes.url, **limits),
        http_backend_config("clock", clock.url, **limits),
        http_backend_config("flaky", misbehaving.url, **limits),
    ], catalogue={"refresh_seconds": 3600, "max_stale_seconds": 3600})
    running = await gateway(config)
    load = Load(running.url)

    async with load.running():  # warm-up: pools, sessions, children all in place
        await asyncio.sleep(1.5)
    baseline, children = await quiet_counts(), child_pids()

    async with load.running():
        await asyncio.sleep(1.5)
        clock_pid = clock.process.pid  # type: ignore[union-attr]
        injecting = time.monotonic()
        await notes.stop()
        os.kill(clock_pid, signal.SIGSTOP)
        misbehaving.backend.mode = "garbage"
        faulted = time.monotonic()
        affected = ("notes", "clock", "flaky")
        await wait_for(lambda: all(circuits(running)[b] == "open" for b in affected), 30)
        metrics = running.app[keys.METRICS].registry
        assert [metrics.get_sample_value("mcpgw_circuit_open", {"backend": b}) for b in affected] == [1.0] * 3
        shown = await admin_circuits(running)
        assert [shown[b] for b in HEALTHY] == ["closed", "closed"]
        assert all(shown[b] in ("open", "half_open") for b in affected)
        await asyncio.sleep(3 * COOLDOWN)  # failing probes, and fast failures between them

        restoring = time.monotonic()  # notes may answer as soon as its new process listens
        await notes.start()  # same port
        os.kill(clock_pid, signal.SIGCONT)
        misbehaving.backend.mode = "ok"
        restored = time.monotonic()
        recovered = await wait_for(lambda: set(circuits(running).values()) == {"closed"}, COOLDOWN + 30)
        await asyncio.sleep(2.0)
    final = await quiet_counts(baseline, tolerance=2 * LOOPS_PER_BACKEND * len(CALLS))
    after = child_pids()

    report(load, (injecting, faulted, restoring, restored, recovered))
    print(f"  tasks {baseline[0]} -> {final[0]}, sockets {baseline[1]} -> {final[1]}, "
          f"children {len(children)} -> {len(after)}")
    # A call in flight when the fault lands (notes' SIGTERM closes its idle connections) may
    # fail with the fault's reason; every call answered before it must have succeeded.
    before = load.of("", before=injecting)
    early = {(r.backend, r.reason) for r in before if r.reason is not None and r.started + r.seconds < injecting}
    assert not early, f"errors before any fault: {early}"
    overlapping = {(r.backend, r.reason) for r in before if r.reason is not None}
    assert all(reason in FAULT_REASONS.get(b, ()) for b, reason in overlapping), overlapping
    for backend in HEALTHY:
        assert {r.reason for r in load.of(backend)} == {None}, f"{backend} saw errors"
    for backend, reasons in FAULT_REASONS.items():
        during = load.of(backend, after=faulted, before=restoring)
        assert {r.reason for r in during} <= reasons | {"circuit_open", None}, backend
        # a success can only be a call (the probe into the frozen clock) answered once restoring began
        assert all(r.started + r.seconds >= restoring for r in during if r.reason is None), backend
        fast = [r for r in during if r.reason == "circuit_open"]
        assert fast, f"{backend}: the breaker never opened"
        assert max(r.seconds for r in fast) < FAST, f"{backend}: circuit_open was not fast"
        first_ok = min(r.started + r.seconds for r in load.of(backend, after=restoring) if r.reason is None)
        assert first_ok - restored <= COOLDOWN + RECOVERY_SLACK, f"{backend} took {first_ok - restored:.2f}s"
        assert {r.reason for r in load.of(backend, after=recovered + 0.5)} == {None}, backend

    failed = sum(1 for r in load.results if r.reason is not None)
    tolerance = 2 * LOOPS_PER_BACKEND * len(CALLS)
    assert failed > 3 * tolerance  # enough failures that a per-failure leak would show
    assert final[0] <= baseline[0] + tolerance, f"tasks {baseline[0]} -> {final[0]}"
    assert final[1] <= baseline[1] + tolerance, f"sockets {baseline[1]} -> {final[1]}"
    assert len(after) == len(children) and after - children == {notes.process.pid}  # type: ignore[union-attr]


def report(load: Load, times: tuple[float, float, float, float, float]) -> None:
    """What happened, per backend and phase (shown with -s; the issue's closing note quotes it)."""
    injecting, faulted, restoring, restored, recovered = times
    print(f"\nfaults applied in {faulted - injecting:.2f}s, restored in {restored - restoring:.2f}s; every circuit "
          f"closed {recovered - restored:.2f}s after restoration (cool-down {COOLDOWN}s)")
    for backend in CALLS:
        phases = {"before": (0, injecting), "inject": (injecting, faulted), "fault": (faulted, restoring),
                  "restore": (restoring, restored), "after": (restored, float("inf"))}
        for phase, (after, before) in phases.items():
            results = load.of(backend, after, before)
            reasons: dict[str, int] = {}
            for r in results:
                reasons[r.reason or "ok"] = reasons.get(r.reason or "ok", 0) + 1
            slowest = max((r.seconds for r in results), default=0.0)
            print(f"  {backend:6} {phase:6} calls={len(results):4} {reasons} slowest={slowest:.3f}s")
