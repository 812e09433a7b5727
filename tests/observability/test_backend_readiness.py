"""A backend that keeps crashing is visible: a warning with its reason, /admin/backends, metrics, /readyz.

`server.ready_requires: any_backend` (the default) makes /readyz 503 while no backend at all is
serving; `none` leaves backends out of readiness.
"""

from __future__ import annotations

import sys
from typing import Any

import aiohttp
import pytest
import structlog
from conftest import API_KEY, StartGateway, make_config, stdio_backend

from observability.helpers import registry_of, value

pytestmark = pytest.mark.timeout(60)

DYING_WORDS = "RuntimeError: the tool server cannot find its data"
CRASHING = {"name": "broken", "transport": "stdio",
            "command": [sys.executable, "-c", f"import sys; print({DYING_WORDS!r}, file=sys.stderr); sys.exit(3)"]}


async def _get(base: str, path: str, token: str | None = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as http, http.get(f"{base}{path.lstrip('/')}", headers=headers) as reply:
        return reply.status, await reply.json()


async def test_a_crashing_backend_alone_makes_the_gateway_not_ready_and_says_why(gateway: StartGateway) -> None:
    with structlog.testing.capture_logs() as logs:
        running = await gateway(make_config([CRASHING]))
    status, body = await _get(running.base, "/readyz")
    assert (status, body) == (503, {"status": "not ready", "reasons": ["backends: none serving (broken down)"]})

    exits = [entry for entry in logs if entry["event"] == "backend process exited"]
    assert exits and exits[0]["log_level"] == "warning"
    assert exits[0]["reason"] == f"exited with status 3: {DYING_WORDS}"

    _, admin = await _get(running.base, "/admin/backends", API_KEY)
    row = admin["backends"][0]
    assert row["status"] == "down"
    assert f"exited with status 3: {DYING_WORDS}" in row["last_error"]
    assert value(registry_of(running.app), "mcpgw_backend_up", backend="broken") == 0


async def test_one_serving_backend_is_enough(gateway: StartGateway) -> None:
    running = await gateway(make_config([CRASHING, stdio_backend("calc")]))
    assert await _get(running.base, "/readyz") == (200, {"status": "ready", "reasons": []})
    assert value(registry_of(running.app), "mcpgw_backend_up", backend="calc") == 1


async def test_ready_requires_none_leaves_backends_out_of_readiness(gateway: StartGateway) -> None:
    running = await gateway(make_config([CRASHING], server={"ready_requires": "none"}))
    assert await _get(running.base, "/readyz") == (200, {"status": "ready", "reasons": []})


async def test_no_backend_configured_is_not_ready(gateway: StartGateway) -> None:
    running = await gateway(make_config([]))
    assert await _get(running.base, "/readyz") == (503, {"status": "not ready",
                                                         "reasons": ["backends: none configured"]})


def test_ready_requires_takes_only_its_two_values() -> None:
    from gateway.config import ConfigError

    with pytest.raises(ConfigError, match=r"^server.ready_requires: must be any_backend or none$"):
        make_config([], server={"ready_requires": "all"})
