"""gateway.transport.sessions: MemorySessionStore with an injected clock, idle expiry and per-tenant LRU bounds."""

from __future__ import annotations

import itertools
import re

from gateway.tenancy import Principal
from gateway.transport.sessions import MemorySessionStore, Session, new_session_id

ALICE = Principal("acme", "alice")
MALLORY = Principal("globex", "mallory")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def store(clock: Clock, max_sessions: int = 100, **options: float) -> MemorySessionStore:
    counter = itertools.count(1)
    return MemorySessionStore(clock=clock, id_factory=lambda: f"s{next(counter)}",
                              limit_for=lambda tenant: max_sessions, **options)


# ---------------------------------------------------------------- ids


def test_session_ids_are_long_url_safe_and_unique() -> None:
    ids = {new_session_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{43}", i) for i in ids)


# ---------------------------------------------------------------- create, get, delete


async def test_create_binds_the_session_to_the_principal_and_version() -> None:
    clock = Clock()
    session = await store(clock).create(ALICE, "2025-06-18")
    assert session == Session("s1", "acme", "alice", "2025-06-18", 1000.0, 1000.0)


async def test_get_returns_a_created_session() -> None:
    sessions = store(Clock())
    created = await sessions.create(ALICE, "2025-11-25")
    assert await sessions.get("s1") == created
    assert sessions.count() == 1


async def test_get_of_an_unknown_id_is_none() -> None:
    assert await store(Clock()).get("nope") is None


async def test_delete_ends_a_session_once() -> None:
    sessions = store(Clock())
    await sessions.create(ALICE, "2025-11-25")
    assert (await sessions.delete("s1"), await sessions.delete("s1")) == (True, False)
    assert (await sessions.get("s1"), sessions.count()) == (None, 0)


async def test_the_default_store_issues_random_ids() -> None:
    sessions = MemorySessionStore()
    first, second = await sessions.create(ALICE, "v"), await sessions.create(ALICE, "v")
    assert first.id != second.id
    assert await sessions.get(first.id) == first


# ---------------------------------------------------------------- idle expiry


async def test_a_session_survives_exactly_the_idle_time() -> None:
    clock = Clock()
    sessions = store(clock, idle_seconds=60)
    await sessions.create(ALICE, "v")
    clock.now += 60
    session = await sessions.get("s1")
    assert session is not None
    assert session.last_seen == 1060.0


async def test_a_session_idle_for_longer_is_gone_and_forgotten() -> None:
    clock = Clock()
    sessions = store(clock, idle_seconds=60)
    await sessions.create(ALICE, "v")
    clock.now += 60.5
    assert (await sessions.get("s1"), sessions.count()) == (None, 0)
    clock.now -= 60.5
    assert await sessions.get("s1") is None


async def test_use_keeps_a_session_alive() -> None:
    clock = Clock()
    sessions = store(clock, idle_seconds=60)
    await sessions.create(ALICE, "v")
    seen = []
    for _ in range(5):
        clock.now += 50
        session = await sessions.get("s1")
        seen.append(session.last_seen if session else None)
    assert seen == [1050.0, 1100.0, 1150.0, 1200.0, 1250.0]


async def test_last_seen_is_refreshed_at_most_once_a_second() -> None:
    clock = Clock()
    sessions = store(clock)
    await sessions.create(ALICE, "v")
    clock.now += 0.5
    first = await sessions.get("s1")
    clock.now += 1.0
    second = await sessions.get("s1")
    assert (first.last_seen if first else None, second.last_seen if second else None) == (1000.0, 1001.5)


# ---------------------------------------------------------------- per-tenant LRU bound


async def test_the_oldest_session_is_evicted_past_the_bound() -> None:
    sessions = store(Clock(), max_sessions=2)
    for _ in range(3):
        await sessions.create(ALICE, "v")
    assert ([await sessions.get(i) is not None for i in ("s1", "s2", "s3")], sessions.count()) == (
        [False, True, True], 2,
    )


async def test_a_recently_used_session_is_kept_over_an_idle_one() -> None:
    sessions = store(Clock(), max_sessions=2)
    await sessions.create(ALICE, "v")
    await sessions.create(ALICE, "v")
    await sessions.get("s1")
    await sessions.create(ALICE, "v")
    assert [await sessions.get(i) is not None for i in ("s1", "s2", "s3")] == [True, False, True]


async def test_a_tenant_over_its_budget_evicts_only_its_own_sessions() -> None:
    sessions = store(Clock(), max_sessions=2)
    await sessions.create(ALICE, "v")  # s1: the least recently used of all
    for _ in range(50):
        await sessions.create(MALLORY, "v")
    assert (await sessions.get("s1") is not None, sessions.count_of("acme"), sessions.count_of("globex")) == (
        True, 1, 2)


async def test_every_end_is_heard_whatever_ended_the_session() -> None:
    clock = Clock()
    sessions = store(clock, max_sessions=1, idle_seconds=10)
    ended: list[str] = []
    sessions.on_ended(ended.append)
    await sessions.create(ALICE, "v")  # s1
    await sessions.create(ALICE, "v")  # s2 evicts s1
    await sessions.delete("s2")
    await sessions.create(MALLORY, "v")  # s3
    clock.now += 11
    assert (sessions.sweep(), ended, sessions.count()) == (1, ["s1", "s2", "s3"], 0)


# ---------------------------------------------------------------- belongs_to


def test_a_session_belongs_to_the_same_tenant_and_subject() -> None:
    session = Session("s1", "acme", "alice", "v", 0.0, 0.0)
    assert session.belongs_to(Principal("acme", "alice", frozenset({"x"}), 5.0)) is True


def test_a_session_does_not_belong_to_another_subject_or_tenant() -> None:
    session = Session("s1", "acme", "alice", "v", 0.0, 0.0)
    assert (session.belongs_to(Principal("acme", "bob")), session.belongs_to(Principal("globex", "alice"))) == (
        False, False,
    )


async def test_a_session_keeps_the_clients_declared_capabilities_and_its_log_level() -> None:
    sessions = store(Clock())
    created = await sessions.create(ALICE, "2025-11-25", frozenset({"sampling"}))
    assert created.capabilities == {"sampling"} and created.log_level is None
    await sessions.set_log_level("s1", "error")
    await sessions.set_log_level("no-such-session", "debug")  # nothing to change, nothing made
    found = await sessions.get("s1")
    assert found is not None and (found.capabilities, found.log_level) == ({"sampling"}, "error")
    assert sessions.count() == 1
