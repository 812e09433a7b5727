"""DNS-rebinding protection: refuse foreign Origin headers, and foreign Hosts on loopback."""

from __future__ import annotations

import functools
import ipaddress
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from gateway.config import ServerConfig
from gateway.protocol.errors import Forbidden

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def is_loopback(host: str) -> bool:
    """A loopback name or IP literal; `127.0.0.1.nip.io` is a domain, not loopback."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _hostname(value: str) -> str:
    """The host part of a Host header or an origin, without port, lower-cased."""
    netloc = urlsplit(value).netloc if "://" in value else value
    if netloc.startswith("["):
        return netloc[: netloc.find("]") + 1].lower()
    return netloc.rsplit(":", 1)[0].lower() if netloc.count(":") == 1 else netloc.lower()


@functools.lru_cache(maxsize=256)
def _loopback_host(host: str) -> bool:
    """Whether a Host header names loopback (cached: a client sends the same one every time)."""
    return is_loopback(_hostname(host))


class OriginPolicy:
    def __init__(self, server: ServerConfig) -> None:
        self.loopback = is_loopback(server.host)
        self.allowed = {o.rstrip("/").lower() for o in server.allowed_origins}
        self.public_host = _hostname(server.public_url) if server.public_url else None

    def check(self, origin: str | None, host: str | None) -> None:
        if self.loopback and host is not None and not _loopback_host(host):
            raise Forbidden("Forbidden: Host not allowed")
        if origin is None:
            return  # SDK clients and servers send none
        if origin.rstrip("/").lower() in self.allowed:
            return
        name = _hostname(origin)
        if (self.public_host and name == self.public_host) or (self.loopback and is_loopback(name)):
            return
        raise Forbidden("Forbidden: Origin not allowed")


def origin_check(server: ServerConfig) -> Middleware:
    """Checks every request, whatever its path: a rebound page could read /metrics or the admin
    endpoints as well as the MCP one (probes and scrapers send no Origin)."""
    policy = OriginPolicy(server)

    @web.middleware
    async def check_origin(request: web.Request, handler: Handler) -> web.StreamResponse:
        policy.check(request.headers.get("Origin"), request.headers.get("Host"))
        return await handler(request)

    return check_origin
