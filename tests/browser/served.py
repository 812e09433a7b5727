"""The gateway the status page is tried against: real stdio backends, two tenants, an admin key.

`calc` runs behind a switch: while the file `calc.down` exists in the test's folder the backend
exits at once, so a test (or the screenshots) can take it down and bring it back like an operator
would see a crash. Shared by the browser tests and `tests/browser/screenshots.py`.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from conftest import API_KEY, JWT_SECRET, SCRAPE_TOKEN
from observability.helpers import Samples, samples_of

ADMIN_KEY = API_KEY
"""acme's key, with the admin scope."""
GLOBEX_KEY = "status-page-globex-key"
"""globex's key: no admin scope."""

SWITCHED = """
import os, runpy, sys
if os.path.exists(sys.argv[1]):
    sys.exit("calc is held down by the test (" + sys.argv[1] + " exists)")
sys.argv = ["calc"]
runpy.run_module("gateway.demo.calc", run_name="__main__")
"""


def gateway_config(folder: Path, *, hostile: bool = False, globex_sessions: int = 5) -> dict[str, Any]:
    """acme (admin) sees everything, but only its callers in group ops are listed clock__convert; globex sees
    calc and clock, with a small rate limit."""
    keys = [{"sha256": hashlib.sha256(ADMIN_KEY.encode()).hexdigest(), "tenant": "acme", "subject": "ci-bot",
             "scopes": ["mcpgw:admin"]},
            {"sha256": hashlib.sha256(GLOBEX_KEY.encode()).hexdigest(), "tenant": "globex", "subject": "bot"}]
    backends = [
        {"name": "calc", "transport": "stdio",
         "command": [sys.executable, "-c", SWITCHED, str(folder / "calc.down")]},
        {"name": "clock", "transport": "stdio", "command": [sys.executable, "-m", "gateway.demo.clock"]},
    ]
    if hostile:
        backends.append({"name": "hostile", "transport": "stdio",
                         "command": [sys.executable, str(Path(__file__).with_name("hostile_backend.py"))]})
    return {"auth": {"jwt": {"secret": JWT_SECRET}, "api_keys": keys},
            "backends": backends,
            "tenants": {"acme": {"backends": ["*"], "limits": {"sessions": 20, "streams": 10, "in_flight": 50},
                                 "rules": [{"name": "ops-convert", "effect": "allow", "callers": {"groups": ["ops"]},
                                            "tools": ["clock__convert"]},
                                           {"name": "no-convert", "effect": "deny", "tools": ["clock__convert"]}]},
                        "globex": {"backends": ["calc", "clock"], "limits": {"sessions": globex_sessions},
                                   "rate_limit": {"requests_per_second": 0.05, "burst": 3}}},
            "metrics": {"token": SCRAPE_TOKEN}}


@dataclass
class StatusGateway:
    app: web.Application
    base: str  # http://127.0.0.1:PORT
    config_path: Path
    folder: Path

    @property
    def page(self) -> str:
        return f"{self.base}/admin/"

    @property
    def mcp(self) -> str:
        return f"{self.base}/mcp"

    def hold_calc_down(self, down: bool) -> None:
        flag = self.folder / "calc.down"
        if down:
            flag.touch()
        else:
            flag.unlink(missing_ok=True)

    async def admin(self, path: str) -> Any:
        async with aiohttp.ClientSession() as http, \
                http.get(f"{self.base}{path}", headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as response:
            assert response.status == 200, await response.text()
            return await response.json()

    async def metrics(self) -> Samples:
        async with aiohttp.ClientSession() as http, \
                http.get(f"{self.base}/metrics", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"}) as response:
            assert response.status == 200
            return samples_of(await response.text())
