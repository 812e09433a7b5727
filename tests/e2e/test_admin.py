"""Admin endpoints over HTTP: backend status for admin-scope tokens only, and a forced refresh.

Issue 17, item 5: the token comes from the Authorization header only, its tenant must be
configured, and a refresh (which asks every backend) runs at most once per interval.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from backend_fixtures import free_port
from conftest import API_KEY, StartGateway, http_backend_config, make_config, make_token, stdio_backend

pytestmark = pytest.mark.timeout(90)

CALC_TOOLS = {"add", "multiply", "evaluate", "convert_units", "slow"}


@dataclass
class Admin:
    base: str

    async def request(self, method: str, path: str, token: str | None = None,
                      query: str = "") -> tuple[int, Any, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with aiohttp.ClientSession() as http, \
                http.request(method, f"{self.base}{path}{query}", headers=headers) as resp:
            body = await resp.json() if resp.content_type == "application/json" else await resp.read()
            return resp.status, body, resp.headers


@pytest.fixture
async def admin(gateway: StartGateway) -> Admin:
    """calc twice without prefixes (every tool of the second collides) and a backend that is down."""
    config = make_config([
        {**stdio_backend("calc"), "name": "calc-a", "namespace": ""},
        {**stdio_backend("calc"), "name": "calc-b", "namespace": ""},
        http_backend_config("dead", f"http://127.0.0.1:{free_port()}/mcp", timeout_seconds=2),
    ])
    running = await gateway(config)
    return Admin(running.base.rstrip("/"))


def _rows(body: Any) -> dict[str, Any]:
    return {row["name"]: row for row in body["backends"]}


async def test_backends_report_status_tools_refresh_errors_collisions_and_circuit(admin: Admin) -> None:
    status, body, _ = await admin.request("GET", "/admin/backends", API_KEY)
    assert status == 200, body
    rows = _rows(body)
    assert list(rows) == ["calc-a", "calc-b", "dead"]
    assert isinstance(body["catalogue_version"], str) and body["catalogue_version"]

    winner, loser, dead = rows["calc-a"], rows["calc-b"], rows["dead"]
    assert (winner["status"], winner["tools"], winner["last_error"], winner["collisions"]) == ("ok", 5, None, [])
    assert (loser["status"], loser["tools"]) == ("ok", 0)
    assert sorted(c["tool"] for c in loser["collisions"]) == sorted(CALC_TOOLS)
    assert {c["winner"] for c in loser["collisions"]} == {"calc-a"}
    assert (winner["prompts"], winner["templates"], winner["offers"]) == (1, 1, ["prompts", "resources", "tools"])
    assert loser["listing_collisions"] == [
        {"kind": "prompts", "key": "explain", "winner": "calc-a"},
        {"kind": "templates", "key": "calc://squares/{count}", "winner": "calc-a"}]
    assert dead["status"] == "down" and dead["tools"] == 0
    assert "unavailable" in dead["last_error"]
    for row in rows.values():
        assert abs(row["last_refresh"] - time.time()) < 60
        assert row["circuit"] in ("closed", "open", "half_open")


async def test_a_refresh_runs_now_and_reports_the_catalogue(admin: Admin) -> None:
    _, before, _ = await admin.request("GET", "/admin/backends", API_KEY)
    status, body, _ = await admin.request("POST", "/admin/catalogue/refresh", make_token("acme", scope="mcpgw:admin"))
    assert status == 200, body
    assert body["tools"] == 5
    assert body["catalogue_version"] == before["catalogue_version"]  # nothing changed upstream
    _, after, _ = await admin.request("GET", "/admin/backends", API_KEY)
    for name, row in _rows(after).items():
        assert row["last_refresh"] > _rows(before)[name]["last_refresh"]


async def test_an_admin_token_in_the_query_string_is_not_accepted(admin: Admin) -> None:
    status, _, headers = await admin.request("GET", "/admin/backends", query=f"?token={API_KEY}")
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")


async def test_an_admin_scope_token_of_a_tenant_that_is_not_configured_is_403(admin: Admin) -> None:
    status, body, _ = await admin.request("GET", "/admin/backends", make_token("ghost", scope="mcpgw:admin"))
    assert (status, body["error"]["message"]) == (403, "Forbidden: unknown tenant")


async def test_a_second_refresh_within_the_interval_is_429_with_retry_after(admin: Admin) -> None:
    token = make_token("acme", scope="mcpgw:admin")
    first, _, _ = await admin.request("POST", "/admin/catalogue/refresh", token)
    second, body, headers = await admin.request("POST", "/admin/catalogue/refresh", token)
    assert (first, second) == (200, 429)
    assert 1 <= int(headers["Retry-After"]) <= 10 and "at most every 10 s" in body["error"]["message"]


@pytest.mark.parametrize(("method", "path"), [("GET", "/admin/backends"), ("POST", "/admin/catalogue/refresh")])
async def test_no_token_is_401_with_a_challenge(admin: Admin, method: str, path: str) -> None:
    status, _, headers = await admin.request(method, path)
    assert status == 401
    assert headers["WWW-Authenticate"].startswith('Bearer resource_metadata="http://127.0.0.1:')


@pytest.mark.parametrize(("method", "path"), [("GET", "/admin/backends"), ("POST", "/admin/catalogue/refresh")])
async def test_a_bad_token_is_401_invalid_token(admin: Admin, method: str, path: str) -> None:
    status, _, headers = await admin.request(method, path, "garbage")
    assert status == 401
    assert 'error="invalid_token"' in headers["WWW-Authenticate"]


@pytest.mark.parametrize("scope", ["", "tools:read", "mcpgw:admin:extra mcpgw"])
@pytest.mark.parametrize(("method", "path"), [("GET", "/admin/backends"), ("POST", "/admin/catalogue/refresh")])
async def test_a_token_without_the_admin_scope_is_403_insufficient_scope(admin: Admin, method: str, path: str,
                                                                         scope: str) -> None:
    status, body, headers = await admin.request(method, path, make_token("acme", scope=scope))
    assert status == 403
    assert 'error="insufficient_scope"' in headers["WWW-Authenticate"]
    assert 'scope="mcpgw:admin"' in headers["WWW-Authenticate"]
    assert "backends" not in body


async def test_refresh_is_post_only(admin: Admin) -> None:
    status, _, _ = await admin.request("GET", "/admin/catalogue/refresh", API_KEY)
    assert status == 405
