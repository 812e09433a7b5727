"""HTTP backends in the config (gateway.config.backend_http): what the client cannot use is refused at load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from upstream.http_servers import self_signed

from gateway.config import ConfigError, parse_config


def http(name: str = "search", **extra: Any) -> dict[str, Any]:
    return {"name": name, "transport": "http", "url": f"http://{name}:8000/mcp", **extra}


def error_of(raw: Any) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, {})
    return str(info.value)


@pytest.mark.parametrize("name", ["Host", "host", "Content-Length", "Transfer-Encoding", "Connection"])
def test_host_and_framing_headers_are_refused_in_backend_and_tenant_headers(name: str) -> None:
    """Issue 16 item 5: the client writes these itself; a configured copy is sent twice or breaks framing."""
    assert error_of({"backends": [http(headers={name: "x"})]}).startswith(f"backends[0].headers.{name}: ")
    raw = {"backends": [http()], "tenants": {"acme": {"backend_headers": {"search": {name: "x"}}}}}
    assert error_of(raw).startswith(f"tenants.acme.backend_headers.search.{name}: ")


@pytest.mark.parametrize(("url", "reason"), [
    ("http://search:8000/m cp", "spaces"),
    ("http://user:pw@search:8000/mcp", "user:password@"),
    ("http://search:99999/mcp", "port"),
    ("http://search:0/mcp", "port"),
    ("http://search:8000/mcp#top", "fragment"),
    ("http:///mcp", "http:// or https://"),
])
def test_urls_the_client_cannot_use_are_refused_with_the_reason(url: str, reason: str) -> None:
    """Issue 16 item 7: these passed check-config and crashed at start, or were silently altered."""
    message = error_of({"backends": [http(url=url)]})
    assert message.startswith("backends[0].url: ")
    assert reason in message


def test_the_http_client_is_builtin_by_default_and_aiohttp_on_request() -> None:
    assert parse_config({}, {}).upstream.http_client == "builtin"
    assert parse_config({"upstream": {"http_client": "aiohttp"}}, {}).upstream.http_client == "aiohttp"
    assert error_of({"upstream": {"http_client": "curl"}}) == "upstream.http_client: must be one of builtin, aiohttp"


def test_proxies_from_the_environment_are_opt_in_per_backend() -> None:
    config = parse_config({"backends": [http(proxy_from_env=True), http("other")]}, {})
    assert [b.proxy_from_env for b in config.backends] == [True, False]  # type: ignore[union-attr]


def test_tls_files_are_loaded_at_config_time(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    tls = {"ca_file": str(cert), "cert_file": str(cert), "key_file": str(key)}
    backend = parse_config({"backends": [http(tls=tls)]}, {}).backends[0]
    assert backend.tls is not None and backend.tls.ca_file == str(cert)
    assert error_of({"backends": [http(tls={"ca_file": str(tmp_path / "missing.pem")})]}).startswith(
        "backends[0].tls: ca_file ")
    assert error_of({"backends": [http(tls={"ca_file": str(cert), "cert_file": str(key)})]}).startswith(
        "backends[0].tls: cert_file/key_file: cannot be loaded")
    assert error_of({"backends": [http(tls={"key_file": str(key)})]}) == (
        "backends[0].tls.cert_file: required with key_file")


@pytest.mark.parametrize(("url", "ok"), [
    ("https://idp.example/jwks", True),
    ("http://127.0.0.1:9000/jwks", True),
    ("http://localhost/jwks", True),
    ("http://idp.example/jwks", False),
])
def test_a_jwks_url_must_be_https_outside_loopback(url: str, ok: bool) -> None:
    """Issue 16 item 10: keys fetched over plain http could be swapped on the way."""
    raw = {"auth": {"jwt": {"algorithms": ["RS256"], "jwks_url": url}}}
    if ok:
        assert parse_config(raw, {}).auth.jwt.jwks_url == url
    else:
        assert error_of(raw).startswith("auth.jwt.jwks_url: must be an https:// URL")


def test_the_jwks_cache_lifetime_defaults_to_five_minutes() -> None:
    assert parse_config({}, {}).auth.jwt.jwks_cache_seconds == 300
    raw = {"auth": {"jwt": {"algorithms": ["RS256"], "jwks_url": "https://idp/jwks", "jwks_cache_seconds": 60}}}
    assert parse_config(raw, {}).auth.jwt.jwks_cache_seconds == 60
