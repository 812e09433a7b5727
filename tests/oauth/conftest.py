"""Fixtures for the OAuth tests: ports chosen up front, a real authorization server, gateways on them.

The authorization server must know the gateway's resource URL before the gateway starts (and
the gateway its issuer), so each module picks its ports first (`Ports`), starts one provider
for the module, and starts its gateways on the port it picked.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from backend_fixtures import RunningBackend, free_port
from conftest import READY_TIMEOUT, RunningGateway, make_config

from gateway import keys
from gateway.app import create_app
from gateway.config import Config
from oauth.authorization_server import TOKEN_EXCHANGE, AuthorizationServer, ensure_installed, running, settings
from oauth.signing_in import TESTER

pytestmark = pytest.mark.timeout(90)


@dataclass(frozen=True)
class Ports:
    """The module's ports: the provider's, the gateway's, a second gateway's, and a backend's."""

    provider: int
    gateway: int
    replica: int
    backend: int

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.provider}"

    @property
    def resource(self) -> str:
        return f"http://127.0.0.1:{self.gateway}/mcp"

    @property
    def backend_url(self) -> str:
        return f"http://127.0.0.1:{self.backend}/mcp"


@pytest.fixture(scope="module")
def ports() -> Ports:
    return Ports(free_port(), free_port(), free_port(), free_port())


@pytest.fixture(scope="session")
def provider_installed() -> None:
    ensure_installed()


@pytest.fixture(scope="module")
def provider(ports: Ports, provider_installed: None) -> Iterator[AuthorizationServer]:
    """The authorization server most modules need (a module that needs other resources, scopes or users
    defines its own): alice of acme, the tester's client, and the gateway's, which may exchange tokens."""
    resources = {ports.resource: {"scope": "mcp:tools"}, ports.backend_url: {"scope": "backend:read", "ttl": 300}}
    config = settings(ports.provider, resources=resources, clients=[gateway_client(ports), TESTER],
                      accounts={"alice": {"tenant": "acme"}}, exchange_audiences=[ports.resource])
    with running(config) as server:
        yield server


def oauth_gateway_config(ports: Ports, backends: list[dict[str, Any]], *, tenants: dict[str, Any] | None = None,
                         jwt: dict[str, Any] | None = None, **sections: Any) -> Config:
    """A gateway taking the provider's access tokens (RS256 via its JWKS), and the test HS secret's."""
    auth = sections.pop("auth", {})
    metadata = {"authorization_servers": [ports.issuer], **auth.pop("resource_metadata", {})}
    jwt_section = {"algorithms": ["RS256"], "jwks_url": f"{ports.issuer}/jwks", "issuer": ports.issuer,
                   **(jwt or {})}
    return make_config(backends, tenants=tenants, auth={"jwt": jwt_section, "resource_metadata": metadata, **auth},
                       **sections)


StartOnPort = Callable[..., Awaitable[RunningGateway]]
GATEWAY_SECRET = "gateway-secret-0123456789abcdef"
SEAL_KEY = base64.b64encode(bytes(range(32))).decode()
"""The `oauth.keys` of the tests' gateways."""


def gateway_client(ports: Ports) -> dict[str, Any]:
    """The gateway's own client at the provider: client credentials, token exchange, users' authorizations."""
    return {"client_id": "gateway", "client_secret": GATEWAY_SECRET,
            "grant_types": ["client_credentials", TOKEN_EXCHANGE, "authorization_code", "refresh_token"],
            "redirect_uris": [f"http://127.0.0.1:{port}/oauth/callback" for port in (ports.gateway, ports.replica)],
            "response_types": ["code"]}


def identity_backend(ports: Ports, mode: str, **auth: Any) -> dict[str, Any]:
    """The identity backend (identity_backend.py) as a gateway backend getting its token by `mode`."""
    return {"name": "identity", "transport": "http", "url": ports.backend_url,
            "auth": {"mode": mode, "issuer": ports.issuer, "client_id": "gateway", "client_secret": GATEWAY_SECRET,
                     "scopes": ["backend:read"], **auth}}


@pytest.fixture
async def identity(ports: Ports, provider: AuthorizationServer) -> AsyncIterator[RunningBackend]:
    """The identity backend on `ports.backend`, checking tokens at the module's `provider`."""
    backend = RunningBackend("identity", ("--issuer", provider.issuer), ports.backend,
                             script=Path(__file__).with_name("identity_backend.py"))
    await backend.start()
    yield backend
    await backend.stop()


@pytest.fixture
async def gateway_on(aiohttp_server: Any) -> StartOnPort:
    """`await gateway_on(config, port)`: the real app on that port, its first catalogue build done."""

    async def start(config: Config, port: int) -> RunningGateway:
        app = create_app(config)
        server: TestServer = await aiohttp_server(app, port=port)
        await asyncio.wait_for(app[keys.CATALOGUE].ready.wait(), READY_TIMEOUT)
        return RunningGateway(app, server)

    return start
