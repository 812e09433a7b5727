"""One upstream per configured backend, created from config and closed together.

Each is wrapped in a `RoutedUpstream` (breaker, limits, deadline, retries), so every
caller (the dispatcher, the catalogue refresher) gets the same protection.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence

from gateway.config import Backend, HttpBackend
from gateway.config.backend_http import tls_context
from gateway.upstream.base import Upstream
from gateway.upstream.http.client import ClientOptions
from gateway.upstream.http.upstream import HttpUpstream, OwnAuth
from gateway.upstream.policy import policy_for
from gateway.upstream.routed import CircuitListener, RoutedUpstream
from gateway.upstream.stdio.upstream import StdioUpstream

CLIENT_INFO = {"name": "mcp-gateway", "version": "0.1.0"}


def make_upstream(backend: Backend, *, http_client: str = "builtin",
                  on_restart: Callable[[str], None] | None = None, own_auth: OwnAuth | None = None) -> Upstream:
    if isinstance(backend, HttpBackend):
        return HttpUpstream(
            backend.name,
            url=backend.url,
            headers=dict(backend.headers),
            max_connections=backend.max_connections,
            client_info=CLIENT_INFO,
            max_response_bytes=backend.max_response_bytes,
            http_client=http_client,
            client_options=client_options(backend),
            protocol=backend.protocol,
            own_auth=own_auth if backend.auth is not None else None,
        )
    return StdioUpstream(
        backend.name, command=stdio_command(backend.command), env=dict(backend.env), cwd=backend.cwd,
        client_info=CLIENT_INFO, max_line=backend.max_response_bytes, on_restart=on_restart,
        protocol=backend.protocol,
    )


def client_options(backend: HttpBackend) -> ClientOptions:
    """How the backend's HTTP client connects (its pool size is set by HttpUpstream)."""
    return ClientOptions(
        tls=tls_context(backend.tls) if backend.tls is not None else None,
        proxy_from_env=backend.proxy_from_env,
        idle_seconds=backend.idle_seconds,
    )


def stdio_command(command: Sequence[str]) -> list[str]:
    """`python` or `python3` as the program means the gateway's own interpreter.

    So `[python, -m, gateway.demo.clock]` runs with the packages the gateway was installed with,
    whatever PATH the gateway was started with (a desktop client, a service manager).
    """
    program, *args = command
    return [sys.executable, *args] if program in ("python", "python3") else [program, *args]


class UpstreamPool:
    """The upstreams by backend name. A reload swaps the whole mapping in one assignment
    (`swap`), so a call looks its upstream up in either the old mapping or the new one."""

    def __init__(self, backends: Sequence[Backend], *, on_circuit_change: CircuitListener | None = None,
                 http_client: str = "builtin", on_restart: Callable[[str], None] | None = None,
                 own_auth: OwnAuth | None = None) -> None:
        """`own_auth` gives the Authorization of the gateway's own calls (the catalogue's) to backends with `auth`."""
        self._on_circuit_change = on_circuit_change
        self._http_client = http_client
        self._on_restart = on_restart
        self._own_auth = own_auth
        self._upstreams = {b.name: self.build(b) for b in backends}

    def build(self, backend: Backend) -> RoutedUpstream:
        """A new upstream for `backend`, not started and not yet in the pool."""
        inner = make_upstream(backend, http_client=self._http_client, on_restart=self._on_restart,
                              own_auth=self._own_auth)
        return RoutedUpstream(inner, policy_for(backend), on_circuit_change=self._on_circuit_change)

    def get(self, name: str) -> RoutedUpstream:
        return self._upstreams[name]

    def swap(self, upstreams: Mapping[str, RoutedUpstream]) -> None:
        """Serve from `upstreams` from now on; the caller drains and closes the ones left out."""
        self._upstreams = dict(upstreams)

    def __iter__(self) -> Iterator[Upstream]:
        return iter(self._upstreams.values())

    async def start(self) -> None:
        await asyncio.gather(*(u.start() for u in self))

    async def close(self) -> None:
        await asyncio.gather(*(u.close() for u in self), return_exceptions=True)
