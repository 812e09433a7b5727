"""gateway.transport.http.security: DNS-rebinding protection with Origin and Host checks."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from gateway.config import ServerConfig
from gateway.protocol.errors import Forbidden
from gateway.transport.http.security import OriginPolicy, is_loopback, origin_check

LOOPBACK = OriginPolicy(ServerConfig(host="127.0.0.1"))
PUBLIC = OriginPolicy(ServerConfig(host="0.0.0.0", public_url="https://gw.example.com/mcp",
                                   allowed_origins=("https://App.example.org/",)))


def refusal(policy: OriginPolicy, origin: str | None, host: str | None) -> str:
    with pytest.raises(Forbidden) as info:
        policy.check(origin, host)
    assert info.value.http_status == 403
    return info.value.message


# ---------------------------------------------------------------- loopback names


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]"])
def test_loopback_names_are_loopback(host: str) -> None:
    assert is_loopback(host) is True


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.1", "example.com", "localhost.example.com", "::"])
def test_other_names_are_not_loopback(host: str) -> None:
    assert is_loopback(host) is False


@pytest.mark.parametrize("host", ["127.0.0.1.nip.io", "127.attacker.example"])
def test_a_domain_that_merely_starts_with_127_is_not_loopback(host: str) -> None:
    assert is_loopback(host) is False


def test_a_rebinding_domain_starting_with_127_is_refused() -> None:
    assert refusal(LOOPBACK, "http://127.0.0.1.nip.io:8080", "127.0.0.1.nip.io:8080") == "Forbidden: Host not allowed"


# ---------------------------------------------------------------- Host while bound to loopback


@pytest.mark.parametrize("host", ["localhost:8080", "127.0.0.1:8080", "LOCALHOST", "[::1]:8080", "127.0.0.1"])
def test_a_loopback_host_passes_on_a_loopback_server(host: str) -> None:
    assert LOOPBACK.check(None, host) is None


@pytest.mark.parametrize("host", ["evil.example:8080", "evil.example", "10.0.0.5:8080", "localhost.evil.example"])
def test_a_foreign_host_is_refused_on_a_loopback_server(host: str) -> None:
    assert refusal(LOOPBACK, None, host) == "Forbidden: Host not allowed"


def test_a_missing_host_passes() -> None:
    assert LOOPBACK.check(None, None) is None


def test_any_host_passes_on_a_non_loopback_server() -> None:
    assert PUBLIC.check(None, "anything.example:1234") is None


# ---------------------------------------------------------------- Origin


def test_no_origin_passes() -> None:
    assert (LOOPBACK.check(None, "localhost"), PUBLIC.check(None, "gw.example.com")) == (None, None)


@pytest.mark.parametrize("origin", ["http://localhost:3000", "http://127.0.0.1:8080", "https://localhost",
                                    "http://[::1]:5173", "HTTP://LOCALHOST:1"])
def test_a_loopback_origin_passes_on_a_loopback_server(origin: str) -> None:
    assert LOOPBACK.check(origin, "127.0.0.1:8080") is None


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://localhost.evil.example",
                                    "http://10.0.0.1:8080", "file://"])
def test_a_foreign_origin_is_refused_on_a_loopback_server(origin: str) -> None:
    assert refusal(LOOPBACK, origin, "127.0.0.1:8080") == "Forbidden: Origin not allowed"


@pytest.mark.parametrize("origin", ["https://app.example.org", "https://APP.example.org/", "HTTPS://app.example.org"])
def test_a_listed_origin_passes_in_any_case_and_with_a_trailing_slash(origin: str) -> None:
    assert PUBLIC.check(origin, "gw.example.com") is None


def test_a_listed_origin_must_match_scheme_and_port() -> None:
    assert refusal(PUBLIC, "http://app.example.org", "gw.example.com") == "Forbidden: Origin not allowed"
    assert refusal(PUBLIC, "https://app.example.org:444", "gw.example.com") == "Forbidden: Origin not allowed"


@pytest.mark.parametrize("origin", ["https://gw.example.com", "https://GW.example.com:443", "http://gw.example.com"])
def test_the_public_url_host_is_an_allowed_origin(origin: str) -> None:
    assert PUBLIC.check(origin, "gw.example.com") is None


@pytest.mark.parametrize("origin", ["https://evil.example", "http://localhost:8080", "https://gw.example.com.evil.io",
                                    "https://sub.gw.example.com"])
def test_other_origins_are_refused_on_a_public_server(origin: str) -> None:
    assert refusal(PUBLIC, origin, "gw.example.com") == "Forbidden: Origin not allowed"


def test_a_listed_loopback_origin_passes_on_a_public_server() -> None:
    policy = OriginPolicy(ServerConfig(host="0.0.0.0", allowed_origins=("http://localhost:3000",)))
    assert policy.check("http://localhost:3000", "x") is None
    assert refusal(policy, "http://localhost:3001", "x") == "Forbidden: Origin not allowed"


def test_the_host_check_comes_before_the_origin_check() -> None:
    assert refusal(LOOPBACK, "http://localhost:1", "evil.example") == "Forbidden: Host not allowed"


# ---------------------------------------------------------------- the middleware


async def test_the_middleware_guards_every_path(aiohttp_client: Any) -> None:
    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    @web.middleware
    async def to_status(request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            return await handler(request)
        except Forbidden as exc:
            return web.Response(status=exc.http_status, text=exc.message)

    app = web.Application(middlewares=[to_status, origin_check(ServerConfig(host="127.0.0.1"))])
    app.router.add_post("/mcp", ok)
    app.router.add_get("/healthz", ok)
    client = await aiohttp_client(app)
    evil = {"Origin": "https://evil.example"}
    replies = []
    for method, path, headers in [("POST", "/mcp", {}), ("POST", "/mcp", evil), ("GET", "/healthz", evil),
                                  ("GET", "/healthz", {})]:
        async with client.request(method, path, headers=headers) as response:
            replies.append((response.status, await response.text()))
    assert replies == [(200, "ok"), (403, "Forbidden: Origin not allowed"), (403, "Forbidden: Origin not allowed"),
                       (200, "ok")]
