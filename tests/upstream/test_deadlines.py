"""gateway.upstream.deadlines: timers armed only when a deadline nears, yet every expiry on time."""

from __future__ import annotations

import asyncio

import pytest

from gateway.upstream.deadlines import Deadlines

SWEEP = 0.2
LATE = 0.1
"""Allowed lateness: less than a sweep, so a deadline that waited for a sweep to expire fails."""


async def _sleep_under(deadlines: Deadlines, budget: float, work: float,
                       extend_to: float | None = None) -> float:
    """Sleep `work` seconds under a deadline `budget` seconds away; when TimeoutError came."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    scope = asyncio.timeout(None)
    with pytest.raises(TimeoutError):
        try:
            async with scope:
                deadlines.watch(scope, started + budget, loop)
                if extend_to is not None:
                    await asyncio.sleep(0.05)
                    scope.reschedule(started + extend_to)  # as progress does
                await asyncio.sleep(work)
        finally:
            deadlines.forget(scope)
    return loop.time() - started


@pytest.mark.parametrize("budget", [0.05, 0.7])  # armed at once / armed by a sweep
async def test_a_call_past_its_deadline_times_out_on_time(budget: float) -> None:
    elapsed = await _sleep_under(Deadlines(SWEEP), budget, 10)
    assert budget <= elapsed < budget + LATE


async def test_many_calls_share_the_sweep_and_each_expires_on_time() -> None:
    deadlines = Deadlines(SWEEP)
    budgets = [0.3 + i * 0.05 for i in range(20)]
    elapsed = await asyncio.gather(*(_sleep_under(deadlines, b, 10) for b in budgets))
    assert all(b <= e < b + LATE for b, e in zip(budgets, elapsed, strict=True))


async def test_a_rescheduled_deadline_is_left_to_asyncio() -> None:
    deadlines = Deadlines(SWEEP)
    elapsed = await _sleep_under(deadlines, 0.7, 10, extend_to=1.2)  # the sweep must not pull it back
    assert 1.2 <= elapsed < 1.2 + LATE


async def test_a_call_that_ends_early_leaves_nothing_behind() -> None:
    deadlines = Deadlines(SWEEP)
    loop = asyncio.get_running_loop()
    scope = asyncio.timeout(None)
    async with scope:
        deadlines.watch(scope, loop.time() + 30, loop)
        assert scope.when() is None  # far off: no timer yet
        await asyncio.sleep(0)
    deadlines.forget(scope)
    assert not deadlines._watched and not scope.expired()
    await asyncio.sleep(SWEEP * 1.5)
    assert not deadlines._sweeping  # the sweep stops once nothing is watched


async def test_a_cancelled_call_is_cancelled_not_timed_out() -> None:
    deadlines = Deadlines(SWEEP)
    loop = asyncio.get_running_loop()

    async def call() -> None:
        scope = asyncio.timeout(None)
        try:
            async with scope:
                deadlines.watch(scope, loop.time() + 0.05, loop)
                await asyncio.sleep(10)
        finally:
            deadlines.forget(scope)

    task = asyncio.create_task(call())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_sweep_that_raises_once_still_arms_later_deadlines() -> None:
    """Issue 16 item 11: a scope that cannot be rescheduled (exited without `forget`) must not end the sweeps."""
    deadlines, loop = Deadlines(SWEEP), asyncio.get_running_loop()
    async with asyncio.timeout(None) as exited:
        await asyncio.sleep(0)
    deadlines.watch(exited, loop.time() + 0.5, loop)  # a caller that forgot to `forget`: reschedule raises
    await asyncio.sleep(SWEEP * 2.5)  # the sweep that meets it has run
    elapsed = await _sleep_under(deadlines, 0.7, 10)
    assert 0.7 <= elapsed < 0.7 + LATE
