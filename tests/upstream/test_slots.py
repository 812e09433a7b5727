"""gateway.upstream.slots: free slots at once, waiters in order, and no slot lost to a cancellation."""

from __future__ import annotations

import asyncio

import pytest

from gateway.upstream.slots import Slots


async def test_free_slots_are_taken_without_waiting_then_callers_queue_in_order() -> None:
    slots = Slots(2)
    assert slots.try_take() and slots.try_take()
    assert not slots.try_take()
    order: list[int] = []

    async def take(n: int) -> None:
        await slots.take()
        order.append(n)

    waiters = [asyncio.create_task(take(n)) for n in range(3)]
    await asyncio.sleep(0)
    assert slots.waiting == 3 and order == []
    for _ in range(3):
        slots.give()
        await asyncio.sleep(0)
    await asyncio.gather(*waiters)
    assert order == [0, 1, 2] and slots.waiting == 0
    assert not slots.try_take()  # all three hold their slot now


async def test_a_free_slot_does_not_jump_the_queue() -> None:
    slots = Slots(1)
    assert slots.try_take()
    first = asyncio.create_task(slots.take())
    await asyncio.sleep(0)
    slots.give()  # handed to the waiter, not put back for anyone to grab
    assert not slots.try_take()
    await first


async def test_a_cancelled_waiter_leaves_the_line() -> None:
    slots = Slots(1)
    assert slots.try_take()
    gone = asyncio.create_task(slots.take())
    await asyncio.sleep(0)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert slots.waiting == 0
    slots.give()
    assert slots.try_take()  # the slot came back, not to the cancelled waiter


async def test_a_slot_handed_to_a_waiter_cancelled_at_that_moment_goes_to_the_next() -> None:
    slots = Slots(1)
    assert slots.try_take()
    unlucky = asyncio.create_task(slots.take())
    next_one = asyncio.create_task(slots.take())
    await asyncio.sleep(0)
    slots.give()  # unlucky's future gets the slot...
    unlucky.cancel()  # ...and its task is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await unlucky
    await asyncio.wait_for(next_one, 1)
    assert not slots.try_take()  # exactly one slot, held by next_one
    slots.give()
    assert slots.try_take()
