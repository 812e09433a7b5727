"""gateway.protocol.capabilities: what a client declared, what a backend is told, what a request needs."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.catalogue.variants import traits
from gateway.protocol.capabilities import (
    ALL,
    SESSION_TASKS,
    declared,
    encode_flags,
    for_backend,
    log_level,
    loud_enough,
    needed,
    serves_task_calls,
)

SDK_CLIENT = {"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": True}}


@pytest.mark.parametrize(("capabilities", "flags"), [
    (SDK_CLIENT, {"sampling", "elicitation.form", "elicitation.url", "roots"}),
    ({"sampling": {"context": {}, "tools": {}}}, {"sampling", "sampling.context", "sampling.tools"}),
    ({"elicitation": {}}, {"elicitation.form"}),  # 2025-06-18 clients: an empty object means form
    ({"elicitation": {"url": {}}}, {"elicitation.url"}),
    ({}, set()),
    ({"sampling": True, "roots": [], "elicitation": "yes", "experimental": {"x": {}}}, set()),
    ("not an object", set()),
    (None, set()),
])
def test_declared_flags_come_only_from_well_formed_capability_objects(capabilities: Any, flags: set[str]) -> None:
    assert declared(capabilities) == flags


def test_a_backend_is_told_exactly_what_the_flags_say_and_never_roots_list_changed() -> None:
    assert for_backend(declared(SDK_CLIENT)) == {"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}}
    assert for_backend(ALL) == {"sampling": {"context": {}, "tools": {}}, "elicitation": {"form": {}, "url": {}},
                                "roots": {}}
    assert for_backend(()) == {}


@pytest.mark.parametrize(("method", "params", "flags"), [
    ("sampling/createMessage", {"messages": [], "maxTokens": 5}, {"sampling"}),
    ("sampling/createMessage", {"messages": [], "includeContext": "thisServer"}, {"sampling"}),
    ("sampling/createMessage", {"messages": [], "tools": []}, {"sampling", "sampling.tools"}),
    ("elicitation/create", {"message": "m", "requestedSchema": {}}, {"elicitation.form"}),
    ("elicitation/create", {"mode": "url", "url": "https://x", "elicitationId": "1"}, {"elicitation.url"}),
    ("roots/list", None, {"roots"}),
    ("ping", None, set()),
])
def test_what_a_backend_request_needs(method: str, params: Any, flags: set[str]) -> None:
    assert needed(method, params) == flags


def test_stored_flags_are_sorted_and_only_known_ones() -> None:
    assert encode_flags({"roots", "sampling", "bogus"}) == ["roots", "sampling"]


def test_log_levels_and_which_messages_are_loud_enough() -> None:
    assert log_level("warning") == "warning"
    assert log_level("WARNING") is None and log_level(3) is None
    message = {"method": "notifications/message", "params": {"level": "info", "data": "x"}}
    assert loud_enough(message, "debug") and loud_enough(message, "info")
    assert not loud_enough(message, "notice")
    assert loud_enough({"method": "notifications/message", "params": {"level": "odd"}}, "emergency")


def test_a_2025_11_25_session_that_declared_tasks_is_listed_the_tools_that_require_them() -> None:
    assert declared({"tasks": {}}, "2025-11-25") == {SESSION_TASKS}
    assert declared({"tasks": {}}, "2025-06-18") == declared({"tasks": {}}) == declared({"tasks": True}, "2025-11-25")
    assert encode_flags({SESSION_TASKS, "sampling"}) == ["sampling", SESSION_TASKS]  # kept with the session
    assert for_backend({SESSION_TASKS}) == {}  # the gateway hosts no client-side tasks
    assert "tasks" in traits(frozenset({SESSION_TASKS}), False)
    assert "tasks" not in traits(frozenset({SESSION_TASKS}), True) | traits(frozenset(), False)


@pytest.mark.parametrize(("capabilities", "serves"), [
    ({"tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}, True),
    ({"tasks": {"requests": {"sampling": {"createMessage": {}}}}}, False),
    ({"tasks": {"requests": {"tools": {"call": True}}}}, False), ({"tasks": {}}, False), ({}, False)])
def test_a_server_serves_task_calls_when_it_declares_tasks_requests_tools_call(capabilities: Any, serves: bool) -> None:
    assert serves_task_calls(capabilities) is serves
