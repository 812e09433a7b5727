"""Backends' OAuth (`auth`, tenants' `backend_auth`) and the `oauth` section: what is refused, with its key path."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from gateway.config import ConfigError, parse_config

KEY = base64.b64encode(bytes(range(32))).decode()
CLIENT = {"mode": "client_credentials", "token_url": "https://as.example/token", "client_id": "gw",
          "client_secret": "s3cret"}


def config(auth: dict[str, Any] | None = None, *, transport: str = "http", tenant: dict[str, Any] | None = None,
           **sections: Any) -> Any:
    backend: dict[str, Any] = {"name": "github", "transport": transport}
    backend.update({"url": "https://gh.example/mcp"} if transport == "http" else {"command": ["true"]})
    if auth is not None:
        backend["auth"] = auth
    return parse_config({"backends": [backend], "tenants": {"acme": {"backends": ["*"], **(tenant or {})}},
                         **sections}, {})


def refusal(*args: Any, **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as info:
        config(*args, **kwargs)
    return str(info.value)


def test_a_client_credentials_backend_reads_whole() -> None:
    auth = config(CLIENT).backends[0].auth
    assert (auth.mode, auth.client_id, auth.client_auth, auth.catalogue_auth) == (
        "client_credentials", "gw", "client_secret_basic", "client_credentials")


def test_user_oauth_lists_with_the_static_headers_and_may_be_a_public_client() -> None:
    auth = {"mode": "user_oauth", "issuer": "https://as.example", "client_id": "gw"}
    parsed = config(auth, server={"public_url": "https://gw.example/mcp"}, oauth={"keys": [KEY]})
    assert parsed.backends[0].auth.catalogue_auth == "headers"
    assert parsed.backends[0].auth.client_secret is None


@pytest.mark.parametrize(("auth", "complaint"), [
    ({**CLIENT, "mode": "magic"}, "backends[0].auth.mode: must be one of"),
    ({k: v for k, v in CLIENT.items() if k != "token_url"}, "backends[0].auth.token_url: required (or issuer"),
    ({k: v for k, v in CLIENT.items() if k != "client_secret"}, "backends[0].auth.client_secret: required"),
    ({**CLIENT, "client_secret": ""}, "backends[0].auth.client_secret: empty"),
    ({**CLIENT, "token_url": "http://as.example/token"}, "backends[0].auth.token_url: must be an https://"),
    ({**CLIENT, "client_auth": "private_key_jwt"}, "backends[0].auth.client_auth: must be one of"),
    ({**CLIENT, "scopes": ["a b"]}, "backends[0].auth.scopes[0]: not an OAuth scope"),
    ({**CLIENT, "catalogue": "anonymous"}, "backends[0].auth.catalogue: must be one of"),
    ({**CLIENT, "colour": "blue"}, "backends[0].auth.colour: unknown key"),
])
def test_a_bad_auth_entry_is_refused_with_its_key_path(auth: dict[str, Any], complaint: str) -> None:
    assert refusal(auth).startswith(complaint)


def test_a_stdio_backend_has_no_auth() -> None:
    assert refusal(CLIENT, transport="stdio").startswith("backends[0].auth: only http backends")


def test_user_oauth_needs_a_public_url_and_keys() -> None:
    auth = {"mode": "user_oauth", "issuer": "https://as.example", "client_id": "gw"}
    assert refusal(auth, oauth={"keys": [KEY]}).startswith("server.public_url: required with user_oauth")
    assert refusal(auth, server={"public_url": "https://gw.example/mcp"}).startswith("oauth.keys: required")


def test_tokens_shared_through_redis_need_keys() -> None:
    assert refusal(CLIENT, store={"redis_url": "redis://127.0.0.1:6379"}).startswith("oauth.keys: required")
    config(CLIENT, store={"redis_url": "redis://127.0.0.1:6379"}, oauth={"keys": [KEY]})


@pytest.mark.parametrize(("key", "complaint"), [("not base64!", "not base64"), (base64.b64encode(b"short").decode(),
                                                                                 "must be 32 bytes")])
def test_a_bad_key_is_refused(key: str, complaint: str) -> None:
    assert complaint in refusal(CLIENT, oauth={"keys": [KEY, key]})
    assert refusal(CLIENT, oauth={"keys": [KEY, key]}).startswith("oauth.keys[1]:")


def test_a_tenant_may_override_a_backends_auth_or_turn_it_off() -> None:
    exchange = {**CLIENT, "mode": "token_exchange", "audience": "github"}
    parsed = config(CLIENT, tenant={"backend_auth": {"github": exchange}})
    assert parsed.backend_auth("github", "acme").mode == "token_exchange"
    assert parsed.backend_auth("github", "other") is not None
    off = config(CLIENT, tenant={"backend_auth": {"github": {"mode": "none"}}})
    assert off.backend_auth("github", "acme") is None


def test_a_tenant_override_must_name_an_http_backend() -> None:
    message = refusal(CLIENT, tenant={"backend_auth": {"gitlab": CLIENT}})
    assert message.startswith("tenants.acme.backend_auth.gitlab: not an http backend")


def test_an_empty_resource_asks_for_none_and_an_audience_is_asked_for_as_given() -> None:
    from gateway.oauth.client import targeted

    entra = config({**CLIENT, "resource": "", "scopes": ["api://backend/.default"]}).backends[0].auth
    assert targeted({}, "", entra) == {"scope": "api://backend/.default"}  # Entra ID v2 refuses `resource`
    auth0 = config({**CLIENT, "audience": "https://api.example"}).backends[0].auth
    assert targeted({}, "https://gh.example/mcp", auth0) == {"resource": "https://gh.example/mcp",
                                                             "audience": "https://api.example"}
