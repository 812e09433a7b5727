"""/healthz and /readyz: readiness says why not, and takes pluggable checks (the store, say)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from conftest import READY_TIMEOUT, RawClient, make_config, make_token, stdio_backend

from gateway import health, keys
from gateway.app import create_app
from observability.helpers import registry_of, value

pytestmark = pytest.mark.timeout(60)


async def _start(aiohttp_server: Any, *checks: tuple[str, health.ReadinessCheck]) -> Any:
    app = create_app(make_config([stdio_backend("calc")]))
    for name, check in checks:
        app[keys.READINESS].add_check(name, check)
    server = await aiohttp_server(app)
    await asyncio.wait_for(app[keys.CATALOGUE].ready.wait(), READY_TIMEOUT)
    return server


async def _get(server: Any, path: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.get(server.make_url(path)) as response:
        return response.status, await response.json()


async def test_ready_once_the_catalogue_is_built(aiohttp_server: Any) -> None:
    server = await _start(aiohttp_server)
    assert await _get(server, "/healthz") == (200, {"status": "ok"})
    assert await _get(server, "/readyz") == (200, {"status": "ready", "reasons": []})
    assert value(registry_of(server.app), "mcpgw_ready") == 1


async def test_each_failing_check_gives_its_reason(aiohttp_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "CHECK_TIMEOUT_SECONDS", 0.2)

    async def unreachable() -> str | None:
        return "unreachable"

    async def broken() -> str | None:
        raise ConnectionError("redis://secret@host refused")  # the message never reaches the body

    async def hung() -> str | None:
        await asyncio.sleep(10)
        return None

    async def fine() -> str | None:
        return None

    server = await _start(aiohttp_server, ("store", unreachable), ("jwks", broken), ("queue", hung), ("ok", fine))
    status, body = await _get(server, "/readyz")
    assert status == 503
    assert body == {"status": "not ready", "reasons": [
        "store: unreachable", "jwks: check failed (ConnectionError)", "queue: no answer within 0.2s"]}
    assert value(registry_of(server.app), "mcpgw_ready") == 0
    assert (await _get(server, "/healthz"))[0] == 200  # alive all the same


async def test_draining_is_not_ready(aiohttp_server: Any) -> None:
    server = await _start(aiohttp_server)
    server.app[keys.READINESS].start_draining()
    assert await _get(server, "/readyz") == (503, {"status": "not ready", "reasons": ["draining"]})


async def test_a_request_during_the_first_build_waits_for_it(aiohttp_server: Any) -> None:
    """A starting process takes connections before it is ready (forked workers share the port): what it
    answers then is the built catalogue, never an empty one."""
    slow_calc = ["sh", "-c", f"sleep 1.5; exec {' '.join(stdio_backend('calc')['command'])}"]
    app = create_app(make_config([{"name": "calc", "transport": "stdio", "command": slow_calc}]))
    server = await aiohttp_server(app)
    assert not app[keys.CATALOGUE].ready.is_set()
    assert (await _get(server, "/readyz"))[0] == 503
    raw = RawClient(aiohttp.ClientSession(), str(server.make_url("/mcp")), make_token("acme"))
    async with raw.session:
        await raw.initialize()
        _, listed, _ = await raw.post(raw.request("tools/list"))
        assert "calc__add" in {t["name"] for t in listed["result"]["tools"]}
        _, pinged, _ = await raw.post(raw.request("ping"))
        assert pinged["result"] == {}
