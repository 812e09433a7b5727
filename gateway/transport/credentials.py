"""The caller's credentials as each transport finds them (see `auth.tokens.Credentials`)."""

from __future__ import annotations

from aiohttp import web

from gateway.auth.metadata import resource_metadata_url, resource_url
from gateway.config import Config


class HttpCredentials:
    """An HTTP request's Authorization header and query string, read only when asked for."""

    __slots__ = ("config", "request")
    fixed = None

    def __init__(self, request: web.Request, config: Config) -> None:
        self.request = request
        self.config = config

    def authorization(self) -> str | None:
        return self.request.headers.get("Authorization")

    def query(self, name: str) -> str | None:
        return self.request.query.get(name)

    def metadata_url(self) -> str | None:
        return resource_metadata_url(self.config, self.request)

    def resource_url(self) -> str | None:
        return resource_url(self.config, self.request)


class HeaderCredentials(HttpCredentials):
    """Only the Authorization header counts (admin endpoints: a token in a URL ends up in logs and
    browser history, and one in a JSON body does not exist there)."""

    __slots__ = ()

    def query(self, name: str) -> str | None:
        return None


class FixedCredentials:
    """One token for the whole connection (stdio's MCP_GATEWAY_TOKEN), or none (anonymous)."""

    __slots__ = ("fixed",)

    def __init__(self, token: str | None) -> None:
        self.fixed = token

    def authorization(self) -> str | None:
        return None

    def query(self, name: str) -> str | None:
        return None

    def metadata_url(self) -> str | None:
        return None

    def resource_url(self) -> str | None:
        return None  # stdio: `auth.jwt.audience`, else the resource server.public_url names
