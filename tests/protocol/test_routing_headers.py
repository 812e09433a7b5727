"""gateway.protocol.routing_headers: header values as the client meant them, and Mcp-Param-* against a schema."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from multidict import CIMultiDict

from gateway.protocol.routing_headers import (
    header_form,
    header_params,
    header_value,
    param_headers,
    param_mismatch,
)


def wrapped(text: str) -> str:
    return f"=?base64?{base64.b64encode(text.encode()).decode()}?="


@pytest.mark.parametrize(("raw", "meant"), [
    ("calc__add", "calc__add"),
    ("  calc__add\t", "calc__add"),  # optional whitespace around a value is not part of it
    (wrapped("zürich"), "zürich"),
    (wrapped(" edge spaces "), " edge spaces "),
    ("=?base64?not base64?=", None),
    ("=?base64?YQ=?=", None),  # not the canonical form of anything
    ("=?base64?/w==?=", None),  # not UTF-8
    ("=?base64?zürich?=", None),  # not base64 at all
    (None, None),
])
def test_a_header_value_is_trimmed_and_its_base64_form_decoded(raw: str | None, meant: str | None) -> None:
    assert header_value(raw) == meant


def schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def test_annotated_arguments_are_found_along_properties_only() -> None:
    found = header_params(schema(
        region={"type": "string", "x-mcp-header": "Region"},
        where={"type": "object", "properties": {"zone": {"type": "integer", "x-mcp-header": "Zone"}}},
        plain={"type": "string"}))
    assert found == {("region",): ("Region", "string"), ("where", "zone"): ("Zone", "integer")}


@pytest.mark.parametrize("bad", [
    schema(n={"type": "number", "x-mcp-header": "N"}),  # numbers are not portable as text
    schema(a={"type": "string", "x-mcp-header": "Same"}, b={"type": "string", "x-mcp-header": "same"}),
    schema(a={"type": "string", "x-mcp-header": "not a token"}),
    schema(a={"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}}),  # off the properties chain
    {"type": "string", "x-mcp-header": "Root"},
    schema(a={"type": "string", "x-mcp-header": 7}),
])
def test_a_schema_with_an_invalid_annotation_has_no_header_arguments(bad: dict[str, Any]) -> None:
    assert header_params(bad) is None


def test_annotations_in_instance_data_are_not_annotations() -> None:
    found = header_params(schema(a={"type": "string", "default": {"x-mcp-header": "Fake"}}))
    assert found == {}


PARAMS = {("region",): ("Region", "string"), ("count",): ("Count", "integer"), ("flag",): ("Flag", "boolean")}


@pytest.mark.parametrize(("arguments", "headers"), [
    ({}, {}),
    ({"region": "eu"}, {"Mcp-Param-Region": "eu"}),
    ({"region": None}, {}),  # null counts as absent
    ({"count": 42}, {"mcp-param-count": "42.0"}),  # names are case-insensitive; integers compare as numbers
    ({"count": 42.0}, {"Mcp-Param-Count": "42"}),
    ({"flag": False}, {"Mcp-Param-Flag": "false"}),
    ({"region": "zürich"}, {"Mcp-Param-Region": wrapped("zürich")}),
    ({"region": "eu", "other": 1}, {"Mcp-Param-Region": "eu", "Mcp-Param-Unknown": "x"}),  # unrecognised: ignored
])
def test_headers_that_repeat_the_arguments_agree(arguments: dict[str, Any], headers: dict[str, str]) -> None:
    assert param_mismatch(PARAMS, arguments, CIMultiDict(headers)) is None


@pytest.mark.parametrize(("arguments", "headers", "why"), [
    ({"region": "eu"}, {}, "missing"),
    ({}, {"Mcp-Param-Region": "eu"}, "argument is not"),
    ({"region": "eu"}, {"Mcp-Param-Region": "EU"}, "does not match"),  # values are case-sensitive
    ({"count": 42}, {"Mcp-Param-Count": "42.5"}, "does not match"),
    ({"count": 42}, {"Mcp-Param-Count": "4.2e1"}, "does not match"),  # no scientific notation
    ({"flag": True}, {"Mcp-Param-Flag": "True"}, "does not match"),
    ({"region": "eu"}, {"Mcp-Param-Region": "=?base64?%%?="}, "malformed"),
    ({"region": ["eu"]}, {"Mcp-Param-Region": "['eu']"}, "argument is not"),  # no header form
])
def test_headers_that_disagree_say_why(arguments: dict[str, Any], headers: dict[str, str], why: str) -> None:
    problem = param_mismatch(PARAMS, arguments, CIMultiDict(headers))
    assert problem is not None and why in problem


def test_a_repeated_param_header_disagrees() -> None:
    headers = CIMultiDict([("Mcp-Param-Region", "eu"), ("Mcp-Param-Region", "eu")])
    problem = param_mismatch(PARAMS, {"region": "eu"}, headers)
    assert problem is not None and "more than once" in problem


@pytest.mark.parametrize("value", ["plain", "zürich", " padded ", "tab\there", "", "=?base64?eA==?=", "日本"])
def test_header_form_round_trips_through_header_value(value: str) -> None:
    form = header_form(value)
    assert form.isascii() and form == form.strip()
    assert header_value(form) == value


def test_param_headers_render_the_annotated_arguments_a_call_has() -> None:
    schema = {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"}, "count": {"type": "integer", "x-mcp-header": "Count"},
        "fast": {"type": "boolean", "x-mcp-header": "Fast"}, "note": {"type": "string"}}}
    annotated = header_params(schema)
    assert annotated is not None
    assert param_headers(annotated, {"region": "eu", "count": 4, "fast": False, "note": "n"}) == {
        "Mcp-Param-Region": "eu", "Mcp-Param-Count": "4", "Mcp-Param-Fast": "false"}
    assert param_headers(annotated, {"region": None}) == {}  # null and absent arguments have no header
