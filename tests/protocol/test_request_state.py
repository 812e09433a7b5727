"""gateway.protocol.request_state: what a sealed requestState binds, and that nothing else opens it."""

from __future__ import annotations

import base64

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.protocol.request_state import (
    INVALID_STATE,
    UNKNOWN_TASK,
    Binding,
    InvalidState,
    Passed,
    RoundRef,
    StateSeal,
    TaskRef,
    UnknownTask,
)

KEY, OTHER_KEY = b"k" * 32, b"o" * 32
REF = RoundRef("round-1", 2, "replica-a")
CALL = Binding.of(("acme", "alice"), "tools/call", {"name": "web__confirm", "arguments": {"b": 1, "a": [1, 2]}})
NOW = 1_000_000.0


def sealed(seal: StateSeal | None = None, binding: Binding = CALL) -> str:
    return (seal or StateSeal([KEY], 60)).seal(REF, binding, now=NOW)


def refusal(token: object, binding: Binding = CALL, seal: StateSeal | None = None, now: float = NOW) -> str:
    with pytest.raises(InvalidState) as refused:
        (seal or StateSeal([KEY], 60)).open(token, binding, now=now)
    assert (refused.value.code, refused.value.message) == (-32602, INVALID_STATE)  # one answer for every reason
    return refused.value.reason


def test_a_state_opens_to_its_round_for_the_same_caller_and_request() -> None:
    assert StateSeal([KEY], 60).open(sealed(), CALL, now=NOW + 59) == REF


def test_the_arguments_digest_ignores_key_order() -> None:
    params = {"name": "web__confirm", "arguments": {"a": [1, 2], "b": 1}}
    reordered = Binding.of(("acme", "alice"), "tools/call", params)
    assert reordered == CALL


@pytest.mark.parametrize(("binding", "reason"), [
    (Binding.of(("acme", "bob"), "tools/call", {"name": "web__confirm", "arguments": {"b": 1, "a": [1, 2]}}),
     "another principal"),
    (Binding.of(("globex", "alice"), "tools/call", {"name": "web__confirm", "arguments": {"b": 1, "a": [1, 2]}}),
     "another principal"),
    (Binding.of(("acme", "alice"), "tools/call", {"name": "web__confirm", "arguments": {"b": 2, "a": [1, 2]}}),
     "another request (method, name or arguments)"),
    (Binding.of(("acme", "alice"), "tools/call", {"name": "web__other", "arguments": {"b": 1, "a": [1, 2]}}),
     "another request (method, name or arguments)"),
    (Binding.of(("acme", "alice"), "prompts/get", {"name": "web__confirm", "arguments": {"b": 1, "a": [1, 2]}}),
     "another request (method, name or arguments)"),
])
def test_another_caller_or_request_is_refused(binding: Binding, reason: str) -> None:
    assert refusal(sealed(), binding) == reason


@pytest.mark.parametrize("state", ["opaque/1+ü", None, {"nested": [1, "two"]}, "x" * 40_000])
def test_a_backends_own_state_comes_back_as_it_was_and_only_under_the_same_binding(state: object) -> None:
    seal = StateSeal([KEY], 60)
    params = {"name": "web__confirm", "arguments": {"b": 1, "a": [1, 2]}}
    token = seal.seal(Passed("web", state), Binding.of(("acme", "alice"), "tools/call", params))
    assert seal.open(token, CALL) == Passed("web", state)
    assert refusal(token, Binding.of(("acme", "bob"), "tools/call", params), seal) == "another principal"
    assert refusal(token[:-2] + ("AA" if token[-2:] != "AA" else "BB"), CALL, seal).startswith("bad tag")


def test_a_state_expires() -> None:
    assert refusal(sealed(), now=NOW + 60) == "expired"


def test_the_payload_is_readable_but_no_change_to_it_opens() -> None:
    version, payload, tag = sealed().split(".")
    claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["r"] == "round-1" and "alice" not in orjson.dumps(claims).decode()  # the subject is not given away
    claims["e"] += 3600
    longer = base64.urlsafe_b64encode(orjson.dumps(claims)).rstrip(b"=").decode()
    assert refusal(f"{version}.{longer}.{tag}").startswith("bad tag")


@given(st.text(max_size=300) | st.integers() | st.none() | st.lists(st.text(), max_size=3))
def test_anything_forged_is_refused_without_an_exception_of_another_kind(token: object) -> None:
    refusal(token)


def test_a_key_ring_opens_what_any_of_its_keys_sealed_and_seals_with_the_first() -> None:
    old = sealed(StateSeal([OTHER_KEY], 60))
    ring = StateSeal([OTHER_KEY], 60)
    ring.prefer(KEY)
    assert ring.keys == [KEY, OTHER_KEY]
    assert ring.open(old, CALL, now=NOW) == REF
    assert StateSeal([KEY], 60).open(sealed(ring), CALL, now=NOW) == REF
    assert refusal(old).startswith("bad tag")  # sealed with a key this seal does not know


# ---------------------------------------------------------------- task handles

TASK = TaskRef("web", "backend-task-1")
ALICE = ("acme", "alice")


def unknown_task(handle: object, principal: tuple[str, str] = ALICE, seal: StateSeal | None = None) -> str:
    with pytest.raises(UnknownTask) as refused:
        (seal or StateSeal([KEY], 60)).open_task(handle, principal)
    assert (refused.value.code, refused.value.message) == (-32602, UNKNOWN_TASK)  # as a backend's unknown taskId
    return refused.value.reason


def test_a_task_handle_opens_to_its_task_for_its_principal_only() -> None:
    seal = StateSeal([KEY], 60)
    handle = seal.seal_task(TASK, ALICE)
    assert handle.startswith("t1.") and seal.open_task(handle, ALICE) == TASK
    assert StateSeal([OTHER_KEY, KEY], 60).open_task(handle, ALICE) == TASK  # an older key still opens it
    assert unknown_task(handle, ("acme", "mallory")) == "another tenant or principal"
    assert unknown_task(handle, ("beta", "alice")) == "another tenant or principal"
    assert unknown_task(handle, seal=StateSeal([OTHER_KEY], 60)).startswith("bad tag")


def test_a_session_task_handle_keeps_the_flags_of_the_backend_session_that_holds_the_task() -> None:
    seal = StateSeal([KEY], 60)
    session_task = TaskRef("web", "backend-task-1", frozenset({"sampling", "tasks"}))
    opened = seal.open_task(seal.seal_task(session_task, ALICE), ALICE)
    assert opened == session_task and opened != TASK  # a 2026 task's handle names no session (None)
    assert seal.open_task(seal.seal_task(TaskRef("web", "t", frozenset()), ALICE), ALICE).session == frozenset()


def test_a_task_handle_and_a_request_state_never_pass_for_each_other() -> None:
    seal = StateSeal([KEY], 60)
    state = seal.seal(Passed("web", "backend-task-1"), CALL, now=NOW)
    assert unknown_task(state) == "unknown format"
    handle = seal.seal_task(TASK, ALICE)
    assert refusal(handle) == "unknown format"
    assert refusal("v1" + handle[2:]).startswith("bad tag")  # the prefix is signed too


@given(st.text(max_size=80) | st.integers() | st.none())
def test_anything_else_is_an_unknown_task(junk: object) -> None:
    unknown_task(junk)


def test_an_altered_task_handle_is_an_unknown_task() -> None:
    handle = StateSeal([KEY], 60).seal_task(TASK, ALICE)
    head, payload, tag = handle.split(".")
    claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["i"] = "someone-elses-task"
    forged = base64.urlsafe_b64encode(orjson.dumps(claims)).rstrip(b"=").decode()
    assert unknown_task(f"{head}.{forged}.{tag}").startswith("bad tag")
