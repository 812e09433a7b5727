"""gateway.catalogue.uris: gateway URIs and templates, and the URIs inside backend replies."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.catalogue.uris import (
    gateway_uri,
    rewrite_blocks,
    rewrite_contents,
    rewrite_messages,
    split,
    template_pattern,
)


@pytest.mark.parametrize("uri", [
    "file:///etc/hosts", "https://example.com/a?b=c#d", "urn:isbn:0451450523", "a+b://x", "notes://note/1+2",
    "", "no-scheme", "x:+", "ünï://çødé", "file:///%2B",
])
def test_the_backend_gets_back_its_uri_byte_for_byte(uri: str) -> None:
    assert split(gateway_uri("notes", uri)) == ("notes", uri)


def test_an_empty_namespace_keeps_the_uri() -> None:
    assert gateway_uri("", "file:///x") == "file:///x"


def test_a_uri_without_a_plus_has_no_namespace() -> None:
    assert split("file:///x") is None


def test_https_uris_are_prefixed_like_any_other() -> None:
    assert gateway_uri("web", "https://example.com/x") == "web+https://example.com/x"


@pytest.mark.parametrize(("template", "uri", "matches"), [
    ("notes://note/{id}", "notes://note/42", True),
    ("notes://note/{id}", "notes://note/42/more", False),
    ("notes://note/{id}", "other://note/42", False),
    ("file:///{+path}", "file:///a/b/c.txt", True),
    ("search://q{?text,limit}", "search://q?text=x&limit=2", True),
    ("search://q{?text,limit}", "search://q", True),
    ("repo://{owner}/{name}{/path}", "repo://a/b/src/x.py", True),
    ("a.b://{x}", "aXb://1", False),  # literal parts are literal, dots included
])
def test_a_template_pattern_matches_what_the_template_expands_to(template: str, uri: str, matches: bool) -> None:
    assert bool(template_pattern(template).fullmatch(uri)) is matches


def test_adjacent_expressions_match_as_one_run_so_a_long_uri_fails_fast() -> None:
    pattern = template_pattern("x://{+a}{+b}{+c}/end")
    assert pattern.pattern == "x://.*/end"
    assert pattern.fullmatch("x://a/b/c/end")
    assert not pattern.fullmatch("x://" + "a" * 100_000)


def test_a_prefixed_template_expands_to_a_uri_that_splits_back() -> None:
    template = gateway_uri("files", "{+base}/x")  # a template that starts with an expression
    expanded = template.replace("{+base}", "file:///home")
    assert split(expanded) == ("files", "file:///home/x")


def test_read_contents_get_gateway_uris() -> None:
    result: dict[str, Any] = {"contents": [{"uri": "a://1", "text": "x"}, {"uri": "a://2", "blob": "AA=="}, "junk"]}
    rewrite_contents(result, "ns")
    assert result == {"contents": [{"uri": "ns+a://1", "text": "x"}, {"uri": "ns+a://2", "blob": "AA=="}, "junk"]}


def test_resource_links_and_embedded_resources_get_gateway_uris_and_nothing_else_changes() -> None:
    blocks: list[Any] = [
        {"type": "text", "text": "see a://1", "uri": "a://not-a-link"},
        {"type": "resource_link", "uri": "a://1", "name": "one"},
        {"type": "resource", "resource": {"uri": "a://2", "text": "two"}},
        {"type": "resource", "resource": "garbage"},
        {"type": "resource_link", "uri": 5},
        None,
    ]
    rewrite_blocks(blocks, "ns")
    assert blocks == [
        {"type": "text", "text": "see a://1", "uri": "a://not-a-link"},
        {"type": "resource_link", "uri": "ns+a://1", "name": "one"},
        {"type": "resource", "resource": {"uri": "ns+a://2", "text": "two"}},
        {"type": "resource", "resource": "garbage"},
        {"type": "resource_link", "uri": 5},
        None,
    ]


def test_prompt_messages_hold_one_block_or_a_list() -> None:
    result = {"messages": [{"role": "user", "content": {"type": "resource_link", "uri": "a://1", "name": "n"}},
                           {"role": "user", "content": [{"type": "resource", "resource": {"uri": "a://2"}}]},
                           {"role": "user", "content": {"type": "text", "text": "t"}}]}
    rewrite_messages(result, "ns")
    assert [m["content"] for m in result["messages"]] == [
        {"type": "resource_link", "uri": "ns+a://1", "name": "n"},
        [{"type": "resource", "resource": {"uri": "ns+a://2"}}],
        {"type": "text", "text": "t"},
    ]


def test_nothing_is_rewritten_without_a_namespace() -> None:
    result = {"contents": [{"uri": "a://1"}], "messages": [{"content": {"type": "resource_link", "uri": "a://1"}}]}
    rewrite_contents(result, "")
    rewrite_messages(result, "")
    assert result == {"contents": [{"uri": "a://1"}], "messages": [{"content": {"type": "resource_link", "uri": "a://1"}}]}


@pytest.mark.parametrize("garbage", [None, [], "x", {"contents": "x"}, {"messages": [None, 1, {"content": 5}]}])
def test_replies_of_the_wrong_shape_are_left_alone(garbage: Any) -> None:
    rewrite_contents(garbage, "ns")
    rewrite_messages(garbage, "ns")
    rewrite_blocks(garbage, "ns")
