"""One point of a curve: the estate (backends, tenants, keys, store), the gateway serving it, and the
measures every curve shares: time to a complete catalogue, resident memory, a reload.

Every gateway here has the bench's anonymous tenant (sees everything), an admin API key for
`POST /admin/reload`, and one API key per extra tenant (the key is the tenant's name).
"""

from __future__ import annotations

import asyncio
import hashlib
import statistics
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from bench.harness import ANONYMOUS_TENANT, Backend, Gateway, gateway_config, start_gateway
from bench.procs import ProcessSet, cpu_seconds, rss_kib
from bench.scale.client import Client, run

ADMIN_KEY = "scale-admin-key"
ADMIN_SCOPE = "mcpgw:admin"
POLL_SECONDS = 0.02
COMPLETE_TIMEOUT = 300.0


def _key_entry(key: str, tenant: str, scopes: Sequence[str] = ()) -> dict[str, Any]:
    return {"sha256": hashlib.sha256(key.encode()).hexdigest(), "tenant": tenant, "subject": f"scale-{tenant}",
            "scopes": list(scopes)}


@dataclass
class Estate:
    """What one gateway serves; `tenants` are besides the anonymous one, each reached by its name as key."""

    backends: list[Backend]
    tenants: dict[str, dict[str, Any]] = field(default_factory=dict)
    stdio: list[dict[str, Any]] = field(default_factory=list)
    store: dict[str, Any] | None = None
    sessions: int = 0  # sessions the curve opens: the per-tenant budget is raised above it

    def config(self, edit: int = 0) -> dict[str, Any]:
        """The gateway config; `edit` > 0 changes only the anonymous tenant's deny list (for reloads)."""
        anonymous = {"backends": ["*"], "tools": {"allow": ["*"], "deny": [f"edit{edit}__*"] if edit else []}}
        keys = [_key_entry(ADMIN_KEY, ANONYMOUS_TENANT, (ADMIN_SCOPE,)), *(_key_entry(t, t) for t in self.tenants)]
        raw = gateway_config(self.backends, tenants={ANONYMOUS_TENANT: anonymous, **self.tenants}, store=self.store,
                             auth={"anonymous_tenant": ANONYMOUS_TENANT, "api_keys": keys})
        raw["backends"] += self.stdio
        if self.stdio and not self.backends:
            raw["server"]["ready_requires"] = "any_backend"
        if self.sessions:
            raw["limits"] = {"sessions": self.sessions * 2}
        return raw


@dataclass
class Served:
    """A gateway serving an estate, and what it took to get there."""

    estate: Estate
    gateway: Gateway
    complete_s: float  # spawn to a tools/list with every expected tool
    edits: int = 0

    @property
    def url(self) -> str:
        return self.gateway.url

    def rss_mib(self) -> float:
        return rss_kib(self.gateway.managed.pid) / 1024

    def refresh(self) -> tuple[float, float]:
        """`POST /admin/catalogue/refresh` (every backend listed again): its seconds, and the CPU
        seconds the gateway spent meanwhile. At the default `catalogue.refresh_seconds` (60) each
        backend is listed once a minute, so that CPU time is what refreshing costs per minute."""
        port = self.gateway.managed.port
        req = urllib.request.Request(f"http://127.0.0.1:{port}/admin/catalogue/refresh", method="POST",
                                     headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        cpu, started = cpu_seconds(self.gateway.managed.pid), time.perf_counter()
        with urllib.request.urlopen(req, timeout=COMPLETE_TIMEOUT) as response:
            response.read()
        return time.perf_counter() - started, cpu_seconds(self.gateway.managed.pid) - cpu

    def reload_s(self) -> float:
        """Seconds for `POST /admin/reload` of the config with one tenant edited (it must apply)."""
        self.edits += 1
        _config_path(self.gateway).write_text(yaml.safe_dump(self.estate.config(self.edits), sort_keys=False))
        port = self.gateway.managed.port
        req = urllib.request.Request(f"http://127.0.0.1:{port}/admin/reload", method="POST",
                                     headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        started = time.perf_counter()
        with urllib.request.urlopen(req, timeout=COMPLETE_TIMEOUT) as response:
            body = orjson.loads(response.read())
        elapsed = time.perf_counter() - started
        if body.get("status") != "applied":
            raise RuntimeError(f"reload not applied: {body}")
        return elapsed


Complete = Callable[[list[str]], bool]
"""Whether the anonymous tenant's full tools/list (its names) shows the whole estate."""


def tool_count(expected: int) -> Complete:
    return lambda names: len(names) == expected


def serve(procs: ProcessSet, estate: Estate, complete: Complete, *, name: str = "gateway",
          wrapper: Sequence[str] = (), timeout: float = 120.0) -> Served:
    """Start a gateway for `estate` and wait until its full tools/list is `complete`."""
    gateway = start_gateway(procs, estate.config(), name=name, wrapper=wrapper, timeout=timeout)
    return Served(estate, gateway, run(_until_complete(gateway, complete, max(timeout, COMPLETE_TIMEOUT))))


async def _until_complete(gateway: Gateway, complete: Complete, within: float) -> float:
    deadline = time.monotonic() + within
    async with Client(gateway.url) as client:
        while True:
            names = await client.list_all()
            if complete(names):
                return time.monotonic() - gateway.managed.started
            if time.monotonic() > deadline:
                raise RuntimeError(f"the catalogue was not complete within {within:g}s ({len(names)} tools)")
            await asyncio.sleep(POLL_SECONDS)


def _config_path(gateway: Gateway) -> Path:
    argv = list(gateway.managed.popen.args)  # type: ignore[arg-type]
    return Path(argv[argv.index("--config") + 1])


def bare_start_s(procs: ProcessSet, starts: int = 3) -> float:
    """Spawn to /readyz of a gateway with no backends (median of `starts`): what a catalogue build is
    measured against."""
    return statistics.median(_bare_start(procs) for _ in range(starts))


def _bare_start(procs: ProcessSet) -> float:
    gateway = start_gateway(procs, gateway_config([]), name="gateway-bare")
    procs.stop(gateway.managed)
    return gateway.ready_seconds
