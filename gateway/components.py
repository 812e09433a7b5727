"""The transport-free core of the gateway, shared by the HTTP app and stdio mode.

Both transports need the same four parts wired the same way: upstreams to the backends,
the catalogue built from them, the dispatcher that answers MCP methods, and the
authenticator that turns a token into a principal. `build_components` wires them;
`start` and `close` bring them up and down in dependency order.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.auth.authenticator import Authenticator
from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.store import MemorySnapshotStore, SnapshotStore
from gateway.config import Config
from gateway.dispatch import Dispatcher
from gateway.dispatch.listen import ListenStreams
from gateway.dispatch.subscriptions import Subscriptions
from gateway.oauth.outbound import BackendCredentials
from gateway.oauth.store import MemoryStore, SecretStore
from gateway.upstream.base import Upstream
from gateway.upstream.pool import UpstreamPool

if TYPE_CHECKING:
    from gateway.audit import AuditTrail
    from gateway.metrics import Metrics
    from gateway.tracing.spans import Tracing


@dataclass(slots=True)
class Components:
    pool: UpstreamPool
    catalogue: CatalogueService
    dispatcher: Dispatcher
    authenticator: Authenticator
    credentials: BackendCredentials  # backends' OAuth tokens and users' grants (gateway.oauth)
    tracing: Tracing | None = None  # the gateway's spans (tracing on); the app or stdio mode closes it

    @property
    def subscriptions(self) -> Subscriptions:
        """The clients' resource subscriptions: built once, kept by every reload's dispatcher."""
        return self.dispatcher.subscriptions

    @property
    def listeners(self) -> ListenStreams:
        """The open 2026 listen streams: built once, kept by every reload's dispatcher."""
        return self.dispatcher.listeners

    async def start(self) -> None:
        """Spawn and connect the upstreams, then start building the catalogue from them."""
        await self.pool.start()
        await self.catalogue.start()

    async def close(self) -> None:
        """Stop refreshing first (it uses the upstreams), then end upstream sessions and children."""
        await self.catalogue.stop()
        await self.pool.close()
        await self.authenticator.close()
        await self.credentials.close()


def build_components(config: Config, *, list_changed: bool, store: SnapshotStore | None = None,
                     metrics: Metrics | None = None, tracing: Tracing | None = None,
                     secrets: SecretStore | None = None, audit: AuditTrail | None = None) -> Components:
    """Wire the core from a config; nothing runs until `start()`. `metrics`, `tracing` and `audit` are the app's,
    if any; `secrets` keeps outbound OAuth's tokens and grants (memory by default: this process only)."""
    credentials = BackendCredentials(config, secrets or MemoryStore())
    pool = UpstreamPool(config.backends, on_circuit_change=metrics.circuit_observed if metrics else None,
                        http_client=config.upstream.http_client,
                        on_restart=metrics.backend_restarted if metrics else None,
                        own_auth=credentials.own_authorization)
    catalogue = CatalogueService(config=config, pool=pool, store=store or MemorySnapshotStore(), metrics=metrics,
                                 tracing=tracing)
    dispatcher, authenticator = build_front(config, catalogue=catalogue, pool=pool, list_changed=list_changed,
                                            credentials=credentials, metrics=metrics, tracing=tracing, audit=audit)
    return Components(pool=pool, catalogue=catalogue, dispatcher=dispatcher, authenticator=authenticator,
                      credentials=credentials, tracing=tracing)


def build_front(config: Config, *, catalogue: CatalogueService, pool: UpstreamPool, list_changed: bool,
                credentials: BackendCredentials, metrics: Metrics | None = None, kept: Dispatcher | None = None,
                tracing: Tracing | None = None, audit: AuditTrail | None = None) -> tuple[Dispatcher, Authenticator]:
    """The parts that hold no connection of their own: at start, and again on every reload. A reload
    passes the dispatcher it replaces (`kept`): its subscriptions, listen streams and audit trail go on in the
    new one."""
    dispatcher = Dispatcher(config=config, catalogue=catalogue, pool=pool, list_changed=list_changed,
                            metrics=metrics, subscriptions=kept.subscriptions if kept else None,
                            listeners=kept.listeners if kept else None,
                            task_records=kept.session_tasks.records if kept else None,
                            credentials=credentials if credentials.enabled else None,
                            audit=kept.audit if kept else audit)
    return dispatcher, Authenticator(config, on_failure=metrics.auth_failed if metrics else None, tracing=tracing)


def kill_children(pool: Iterable[Upstream]) -> list[int]:
    """SIGKILL the upstreams' running stdio children: the last resort of a forced exit, so none is orphaned."""
    killed = []
    for upstream in pool:
        pid = getattr(upstream, "pid", None)  # only stdio upstreams have a child process
        if isinstance(pid, int):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed
