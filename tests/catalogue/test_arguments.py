"""SchemaCheck: the fast and the explaining validator agree, and hostile input cannot switch checks off."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from backend_fixtures import free_port

from gateway.catalogue.arguments import SchemaCheck

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "maximum": 10}, "tags": {"type": "array", "items": {"type": "string"}},
                   "email": {"type": "string", "format": "email"}},
    "required": ["n"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("arguments", [{"n": 1}, {"n": 10, "tags": ["a", "b"]}, {"n": 0, "email": "a@b.example"}])
def test_conforming_arguments_pass(arguments: dict[str, Any]) -> None:
    assert SchemaCheck(SCHEMA).problem(arguments) is None


@pytest.mark.parametrize(("arguments", "problem"), [
    ({}, "'n' is a required property"),
    ({"n": "1"}, "'1' is not of type 'integer' (at n)"),
    ({"n": 11}, "11 is greater than the maximum of 10 (at n)"),
    ({"n": 1, "tags": ["a", 2]}, "2 is not of type 'string' (at tags/1)"),
    ({"n": 1, "extra": True}, "Additional properties are not allowed ('extra' was unexpected)"),
    ({"n": 1, "email": "not-an-email"}, "'not-an-email' is not a 'email' (at email)"),
])
def test_violations_are_worded_by_python_jsonschema(arguments: dict[str, Any], problem: str) -> None:
    assert SchemaCheck(SCHEMA).problem(arguments) == problem


def test_an_integer_too_big_for_the_fast_validator_is_still_judged() -> None:
    check = SchemaCheck(SCHEMA)
    assert check.problem({"n": 10**40}) == f"{10**40} is greater than the maximum of 10 (at n)"
    assert check.problem({"n": 1, "tags": [str(10**40)]}) is None
    assert check.problem({"n": "x"}) is not None  # and checking is still on afterwards


def test_deeply_nested_arguments_are_refused_without_switching_the_check_off() -> None:
    check = SchemaCheck({"type": "object", "properties": {"a": {"type": "array", "maxItems": 0}}})
    deep: Any = []
    for _ in range(900):
        deep = [deep]
    assert check.problem({"a": deep}) is not None
    assert check.problem({"a": [1]}) == "[1] is expected to be empty (at a)"


@pytest.mark.parametrize("schema", [None, "object", [1], {"type": "nonsense"}, {"required": "a"}])
def test_a_missing_or_broken_schema_checks_nothing(schema: Any) -> None:
    assert SchemaCheck(schema).problem({"anything": [1]}) is None


def test_an_unresolvable_ref_checks_nothing() -> None:
    check = SchemaCheck({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}})
    assert check.problem({"a": 1}) is None
    assert check.problem({"a": "again"}) is None


async def test_a_remote_ref_is_never_fetched() -> None:
    fetched: list[str] = []

    async def schema(request: web.Request) -> web.Response:
        fetched.append(request.path)
        return web.json_response({"type": "string"})

    app = web.Application()
    app.router.add_get("/s.json", schema)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        check = SchemaCheck({"type": "object", "properties": {"a": {"$ref": f"http://127.0.0.1:{port}/s.json"}}})
        assert check.problem({"a": 5}) is None  # not evaluated, so not refused
        assert fetched == []
    finally:
        await runner.cleanup()
