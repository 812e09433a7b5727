from __future__ import annotations

import asyncio

import pytest

from gateway.transport.inflight import CancelledByClient, InFlight


async def test_a_client_cancel_becomes_cancelled_by_client_and_the_task_goes_on() -> None:
    inflight = InFlight()

    async def request() -> str:
        try:
            return await inflight.run(("s", 1), asyncio.sleep(10, "late"))
        except CancelledByClient:
            await asyncio.sleep(0)  # still alive: uncancel() took the cancellation back
            return "cancelled"

    task = asyncio.create_task(request())
    await asyncio.sleep(0.01)
    assert inflight.cancel(("s", 1)) is True
    assert await task == "cancelled"
    assert inflight.cancel(("s", 1)) is False  # finished requests are forgotten


async def test_a_hang_up_still_cancels_the_request() -> None:
    inflight = InFlight()
    task = asyncio.create_task(inflight.run(("s", 1), asyncio.sleep(10)))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_unknown_or_other_sessions_requests_are_not_cancelled() -> None:
    inflight = InFlight()
    task = asyncio.create_task(inflight.run(("s", 1), asyncio.sleep(0.05, "done")))
    await asyncio.sleep(0.01)
    assert inflight.cancel(("other", 1)) is False
    assert inflight.cancel(("s", 2)) is False
    assert await task == "done"
