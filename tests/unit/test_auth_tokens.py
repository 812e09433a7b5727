"""gateway.auth.tokens: the token from header, query or params, in the configured order."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.auth.tokens import extract_token
from gateway.config import AuthConfig, Config
from gateway.transport.credentials import FixedCredentials, HttpCredentials

ALL = AuthConfig()


def request(query: str = "", authorization: str | None = None) -> HttpCredentials:
    headers = {"Authorization": authorization} if authorization is not None else {}
    mocked: web.Request = make_mocked_request("POST", f"/mcp{query}", headers=headers)
    return HttpCredentials(mocked, Config())


def call(token: Any = None, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", **params}}
    if token is not None:
        body["params"]["token"] = token
    return body


# ---------------------------------------------------------------- each source


def test_a_bearer_header_gives_its_token() -> None:
    assert extract_token(request(authorization="Bearer abc.def"), None, ALL) == "abc.def"


def test_the_bearer_scheme_is_case_insensitive() -> None:
    assert extract_token(request(authorization="bEaReR abc"), None, ALL) == "abc"


def test_spaces_around_the_bearer_token_are_removed() -> None:
    assert extract_token(request(authorization="  Bearer   abc  "), None, ALL) == "abc"


@pytest.mark.parametrize("header", ["Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "abc", "Token abc", ""])
def test_a_header_that_is_not_a_bearer_token_gives_an_empty_token(header: str) -> None:
    assert extract_token(request("?token=q", authorization=header), call("p"), ALL) == ""


def test_the_query_parameter_gives_its_token() -> None:
    assert extract_token(request("?token=q1"), None, ALL) == "q1"


def test_an_empty_query_parameter_gives_an_empty_token() -> None:
    assert extract_token(request("?token="), call("p"), ALL) == ""


def test_the_query_parameter_name_is_configurable() -> None:
    config = AuthConfig(query_param="access_token")
    assert extract_token(request("?token=no&access_token=yes"), None, config) == "yes"


def test_the_params_token_is_used_and_stripped() -> None:
    data = call("p1")
    assert extract_token(request(), data, ALL) == "p1"
    assert data == {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}


def test_a_params_token_that_is_not_a_string_gives_an_empty_token() -> None:
    data = call({"nested": "secret"})
    assert extract_token(request(), data, ALL) == ""
    assert "token" not in data["params"]


def test_no_token_anywhere_gives_none() -> None:
    assert extract_token(request("?other=1"), call(), ALL) is None


@pytest.mark.parametrize("data", [None, [], "text", {"params": None}, {"params": ["token"]}, {"method": "ping"}])
def test_bodies_without_params_object_give_none(data: Any) -> None:
    assert extract_token(request(), data, ALL) is None


# ---------------------------------------------------------------- order and enabled sources


def test_the_header_wins_over_query_and_params_by_default() -> None:
    data = call("p")
    assert extract_token(request("?token=q", authorization="Bearer h"), data, ALL) == "h"
    assert "token" not in data["params"]


def test_the_query_wins_over_params_by_default() -> None:
    assert extract_token(request("?token=q"), call("p"), ALL) == "q"


def test_the_configured_order_is_followed() -> None:
    config = AuthConfig(token_sources=("params", "query", "header"))
    assert extract_token(request("?token=q", authorization="Bearer h"), call("p"), config) == "p"
    assert extract_token(request("?token=q", authorization="Bearer h"), call(), config) == "q"


def test_a_disabled_header_is_ignored() -> None:
    config = AuthConfig(token_sources=("query",))
    assert extract_token(request(authorization="Bearer h"), None, config) is None


def test_a_disabled_query_is_ignored() -> None:
    config = AuthConfig(token_sources=("header", "params"))
    assert extract_token(request("?token=q"), call("p"), config) == "p"


def test_a_params_token_is_stripped_even_when_params_are_disabled() -> None:
    data = call("secret")
    assert extract_token(request(authorization="Bearer h"), data, AuthConfig(token_sources=("header",))) == "h"
    assert data["params"] == {"name": "x"}


def test_no_enabled_source_gives_none_but_still_strips_params() -> None:
    data = call("secret")
    assert extract_token(request("?token=q", authorization="Bearer h"), data, AuthConfig(token_sources=())) is None
    assert data["params"] == {"name": "x"}


def test_params_tokens_are_stripped_from_every_batch_item() -> None:
    batch = [call("secret-1"), call("secret-2")]
    extract_token(request(authorization="Bearer h"), batch, ALL)
    assert [item["params"] for item in batch] == [{"name": "x"}, {"name": "x"}]


def test_a_fixed_connection_token_wins_and_params_tokens_are_still_stripped() -> None:
    data = call("secret")
    assert extract_token(FixedCredentials(" stdio-token "), data, ALL) == "stdio-token"
    assert data["params"] == {"name": "x"}


def test_without_a_fixed_token_the_configured_sources_apply() -> None:
    assert extract_token(FixedCredentials(None), call("p"), ALL) == "p"
    assert extract_token(FixedCredentials(None), None, ALL) is None
