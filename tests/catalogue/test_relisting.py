"""Relisting: after a request, a backend that cannot announce is re-listed, coalesced, only for listeners."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection

import pytest
from conftest import make_config

from gateway.catalogue.relisting import Relisting

TENANTS = {"acme": {"backends": ["quiet", "loud"]}, "wide": {"backends": ["*"]}, "other": {"backends": ["loud"]}}
CONFIG = make_config([{"name": "quiet", "transport": "http", "url": "http://127.0.0.1:9/mcp"},
                      {"name": "loud", "transport": "http", "url": "http://127.0.0.1:9/mcp"}], tenants=TENANTS)


class Backends:
    """The refreshes asked for, each held until `release()`; `quiet` cannot announce, `loud` can."""

    def __init__(self) -> None:
        self.refreshed: list[str] = []
        self.gate = asyncio.Event()
        self.fail = False

    async def refresh(self, backend: str) -> None:
        self.refreshed.append(backend)
        await self.gate.wait()
        if self.fail:
            raise RuntimeError("backend down")

    def relisting(self, listening: Collection[str], gap: float = 0.0) -> Relisting:
        relisting = Relisting(refresh=self.refresh, announces=lambda name: name == "loud", config=lambda: CONFIG,
                              gap=gap)
        relisting.watch(lambda: listening)
        return relisting


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.parametrize(("listening", "backend"), [((), "quiet"), (("acme",), "loud"), (("other",), "quiet")])
async def test_no_relist_without_a_listener_who_needs_it(listening: tuple[str, ...], backend: str) -> None:
    """Nobody listens; the backend announces itself; the only listener's tenant does not see it."""
    backends = Backends()
    backends.relisting(listening).served(backend)
    await settle()
    assert backends.refreshed == []


@pytest.mark.parametrize("tenant", ["acme", "wide"])
async def test_requests_done_during_a_relist_bring_exactly_one_more(tenant: str) -> None:
    backends = Backends()
    relisting = backends.relisting(("other", tenant))
    relisting.served("quiet")
    await settle()
    for _ in range(5):  # their changes may have come after the running re-list listed
        relisting.served("quiet")
    assert backends.refreshed == ["quiet"]
    backends.gate.set()
    await settle()
    assert backends.refreshed == ["quiet", "quiet"]
    relisting.served("quiet")  # idle again: a request brings its own
    await settle()
    assert backends.refreshed == ["quiet", "quiet", "quiet"]
    await relisting.stop()


async def test_the_one_more_waits_the_gap_after_the_last() -> None:
    """Under constant calls a backend is re-listed back to back, but never closer than the gap."""
    backends = Backends()
    relisting = backends.relisting(("acme",), gap=0.2)
    relisting.served("quiet")
    await settle()
    relisting.served("quiet")  # done during the running re-list
    backends.gate.set()
    await asyncio.sleep(0.1)
    assert backends.refreshed == ["quiet"]
    await asyncio.sleep(0.2)
    assert backends.refreshed == ["quiet", "quiet"]
    await relisting.stop()


async def test_a_failed_relist_leaves_the_next_one_possible() -> None:
    backends = Backends()
    backends.fail = True
    backends.gate.set()
    relisting = backends.relisting(("acme",))
    relisting.served("quiet")
    await settle()
    relisting.served("quiet")
    await settle()
    assert backends.refreshed == ["quiet", "quiet"]


async def test_stop_cancels_a_running_relist() -> None:
    backends = Backends()
    relisting = backends.relisting(("acme",))
    relisting.served("quiet")
    await settle()
    await relisting.stop()
    relisting.served("quiet")  # nothing left running: a new one starts
    await settle()
    assert backends.refreshed == ["quiet", "quiet"]
    await relisting.stop()


async def test_listeners_are_followed_as_they_come_and_go() -> None:
    backends, listening = Backends(), []
    backends.gate.set()
    relisting = Relisting(refresh=backends.refresh, announces=lambda name: False, config=lambda: CONFIG)
    relisting.watch(lambda: listening)
    listening.append("acme")
    relisting.served("quiet")  # not told yet: the last word was nobody
    await settle()
    relisting.changed()
    relisting.served("quiet")
    await settle()
    listening.clear()
    relisting.changed()
    relisting.served("quiet")
    await settle()
    assert backends.refreshed == ["quiet"]


class OtherReplicas:
    """The other replicas' listening tenants as a test sets them; what this replica told them."""

    def __init__(self) -> None:
        self.theirs: frozenset[str] = frozenset()
        self.told: list[frozenset[str]] = []
        self.listeners: list[Callable[[], None]] = []

    def tell(self, tenants: frozenset[str]) -> None:
        self.told.append(tenants)

    def tenants(self) -> frozenset[str]:
        return self.theirs

    def on_change(self, listener: Callable[[], None]) -> None:
        self.listeners.append(listener)

    def set(self, *tenants: str) -> None:
        self.theirs = frozenset(tenants)
        for listener in self.listeners:
            listener()


async def test_a_listener_on_another_replica_counts_while_it_is_there() -> None:
    backends, others = Backends(), OtherReplicas()
    backends.gate.set()
    relisting = Relisting(refresh=backends.refresh, announces=lambda name: False, config=lambda: CONFIG)
    relisting.watch(tuple, others)
    others.set("other")  # sees only `loud`
    relisting.served("quiet")
    await settle()
    assert backends.refreshed == []
    others.set("other", "acme")
    relisting.served("quiet")
    await settle()
    assert backends.refreshed == ["quiet"] and set(relisting.tenants()) == {"other", "acme"}
    others.set()
    relisting.served("quiet")
    await settle()
    assert backends.refreshed == ["quiet"]


async def test_the_other_replicas_hear_of_each_change_of_the_local_listeners_once() -> None:
    backends, others, listening = Backends(), OtherReplicas(), ["acme"]
    relisting = Relisting(refresh=backends.refresh, announces=lambda name: False, config=lambda: CONFIG)
    relisting.watch(lambda: listening, others)
    listening.append("acme")  # a second stream of the same tenant: nothing new to tell
    relisting.changed()
    others.set("wide")
    listening.clear()
    relisting.changed()
    assert others.told == [frozenset({"acme"}), frozenset()]
    assert set(relisting.tenants()) == {"wide"}
