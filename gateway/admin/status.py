"""`GET /admin/status`, `/admin/reloads` and `/admin/replicas`: the gateway at a glance.

`status` is this replica (versions, readiness, the store, sessions, what its backends are doing)
and the traffic window's reach; `reloads` the history of config loads, every replica's with Redis;
`replicas` every replica heard from through the store, each with its config version, so one that
missed a reload stands out.
"""

from __future__ import annotations

import os
import socket
import time
from collections import Counter
from collections.abc import Callable
from importlib import metadata
from typing import Any

from aiohttp import web

from gateway import keys
from gateway.admin.access import admin_json, require_admin
from gateway.admin.backends import live_state
from gateway.config import Config
from gateway.config.version import config_version

PACKAGE = "mcp-gateway"


def package_version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def describe_replica(app: web.Application, *, clock: Callable[[], float] = time.time) -> Callable[[], dict[str, Any]]:
    """This replica as the others and the status page see it: fields read fresh at every call."""
    started_at, host, pid, version = clock(), socket.gethostname(), os.getpid(), package_version()
    versions = _Versions()

    def describe() -> dict[str, Any]:
        catalogue = app[keys.CATALOGUE]
        return {"host": host, "pid": pid, "version": version, "started_at": started_at,
                "uptime_seconds": round(clock() - started_at, 1), "config_version": versions.of(catalogue.config),
                "catalogue_version": catalogue.current.version, "sessions": app[keys.SESSIONS].count(),
                "in_flight": sum(app[keys.EXCHANGE].busy.values())}

    return describe


class _Versions:
    """The version of the config in force, computed again only when a reload replaced it."""

    def __init__(self) -> None:
        self._config: Config | None = None
        self._version = ""

    def of(self, config: Config) -> str:
        if config is not self._config:
            self._config, self._version = config, config_version(config)
        return self._version


async def status(request: web.Request) -> web.Response:
    await require_admin(request)
    app = request.app
    replicas, traffic = app[keys.REPLICAS], app[keys.TRAFFIC]
    reasons = await app[keys.READINESS].reasons()
    health = replicas.health
    return admin_json({
        "gateway": {**replicas.own(), "ready": not reasons, "not_ready": reasons},
        "store": {"kind": "redis" if health is not None else "memory", "up": health.up if health is not None else True},
        "backends": _states(app),
        "tenants": len(app[keys.EXCHANGE].tenants),
        "window": {"sample_seconds": traffic.every, "history_seconds": traffic.keep},
    })


def _states(app: web.Application) -> dict[str, int]:
    """How many backends are in each live state (up, degraded, down, pending)."""
    catalogue, pool = app[keys.CATALOGUE], app[keys.POOL]
    counted: Counter[str] = Counter()
    for backend in catalogue.config.backends:
        snapshot, upstream = catalogue.current.snapshots.get(backend.name), pool.get(backend.name)
        counted[live_state(snapshot.status if snapshot else "pending", upstream.circuit_state, backend.transport,
                           upstream.pid)] += 1
    return {state: counted.get(state, 0) for state in ("up", "degraded", "down", "pending")}


async def reloads(request: web.Request) -> web.Response:
    await require_admin(request)
    own = request.app[keys.REPLICAS].own()
    return admin_json({"config_version": own["config_version"], "replica": own["replica"],
                       "reloads": await request.app[keys.RELOADS].recent()})


async def replicas(request: web.Request) -> web.Response:
    await require_admin(request)
    registry = request.app[keys.REPLICAS]
    seen, answered = await registry.seen()
    versions = Counter(replica.get("config_version") for replica in seen)
    return admin_json({"store": "redis" if registry.redis is not None else "memory", "store_answered": answered,
                       "config_versions": len(versions), "replicas": seen})
