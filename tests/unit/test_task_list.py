"""gateway.dispatch.task_list: what tasks/list remembers per principal, bounded, and its cursors."""

from __future__ import annotations

import pytest

from gateway.dispatch.task_list import TaskRecords, _after
from gateway.protocol.errors import InvalidParams
from gateway.protocol.request_state import TaskRef

ALICE, BOB, CAROL = ("acme", "alice"), ("acme", "bob"), ("beta", "carol")


def ref(n: int) -> TaskRef:
    return TaskRef("web", f"task-{n}", frozenset())


def test_a_principal_pages_through_its_own_tasks_in_the_order_they_were_made() -> None:
    records = TaskRecords()
    for n in range(5):
        records.add(ALICE, ref(n), f"h{n}")
    records.add(BOB, ref(9), "h9")
    first, more = records.page(ALICE, 0, 2)
    assert ([m.handle for m in first], more) == (["h0", "h1"], True)
    rest, more = records.page(ALICE, first[-1].seq, 10)
    assert ([m.handle for m in rest], more) == (["h2", "h3", "h4"], False)
    assert [m.handle for m in records.page(BOB, 0, 10)[0]] == ["h9"]
    assert records.page(CAROL, 0, 10) == ([], False)


def test_the_records_are_bounded_per_principal_and_in_principals() -> None:
    records = TaskRecords(per_principal=2, principals=2)
    for n in range(3):
        records.add(ALICE, ref(n), f"h{n}")
    assert [m.handle for m in records.page(ALICE, 0, 10)[0]] == ["h1", "h2"]  # the oldest dropped
    records.add(BOB, ref(5), "h5")
    records.add(CAROL, ref(6), "h6")  # a third principal: the one heard of least recently goes
    assert records.page(ALICE, 0, 10) == ([], False)
    records.forget(BOB, "h5")
    assert records.page(BOB, 0, 10) == ([], False)


@pytest.mark.parametrize("cursor", ["", "tl1.", "tl1.x", "tl1.²", "tl1.-1", "tl2.3", 3, [], "tl1." + "9" * 19])
def test_a_cursor_that_is_not_the_gateways_is_refused(cursor: object) -> None:
    with pytest.raises(InvalidParams):
        _after(cursor)


def test_the_gateways_cursors_name_where_the_last_page_ended() -> None:
    assert (_after(None), _after("tl1.7")) == (0, 7)


def test_a_task_is_known_by_its_backend_and_taskid_until_it_is_dropped() -> None:
    records = TaskRecords(per_principal=1)
    records.add(ALICE, ref(1), "h1", "session-a")
    principal, made = records.owner("web", "task-1") or (None, None)
    assert (principal, made and made.handle, made and made.client) == (ALICE, "h1", "session-a")
    records.add(ALICE, ref(2), "h2")  # h1 dropped: the oldest over the bound
    assert records.owner("web", "task-1") is None and records.owner("web", "task-2") is not None
    records.forget(ALICE, "h2")
    assert records.owner("web", "task-2") is None
