"""An outbound HTTP proxy for the builtin client, from HTTPS_PROXY / HTTP_PROXY / NO_PROXY.

Used only for a backend with `proxy_from_env: true` (platform teams route egress through
proxies). An http:// backend is reached by sending each request to the proxy with the
absolute URL as its target; an https:// backend through a CONNECT tunnel, with TLS to the
backend inside it, so the proxy sees neither the requests nor the backend's credentials.
The environment is read once, when the backend's client is made, as aiohttp's `trust_env` does.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import urllib.request
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from gateway.upstream.http.client import MAX_HEAD_BYTES, ConnectFailed, Target


@dataclass(frozen=True, slots=True)
class Proxy:
    """Where a backend's connections go instead, and the header that authenticates to it."""

    host: str
    port: int
    authorization: str | None  # Proxy-Authorization, from user:password@ in the proxy URL

    @classmethod
    def from_env(cls, target: Target) -> Proxy | None:
        """The proxy the environment names for `target`, None if none or NO_PROXY matches."""
        scheme = "https" if target.tls else "http"
        url = urllib.request.getproxies().get(scheme)
        if not url or urllib.request.proxy_bypass(target.host):
            return None
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"{scheme} proxy {url!r}: only http:// proxies are supported")
        credentials = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
        authorization = f"Basic {base64.b64encode(credentials.encode()).decode()}" if parts.username else None
        return cls(parts.hostname, parts.port or 80, authorization)

    def header_lines(self) -> str:
        return f"Proxy-Authorization: {self.authorization}\r\n" if self.authorization else ""

    async def tunnel(self, sock: socket.socket, target: Target) -> None:
        """Ask the proxy, over `sock`, for a tunnel to `target`; return once it stands."""
        loop = asyncio.get_running_loop()
        request = f"CONNECT {target.host_port} HTTP/1.1\r\nHost: {target.host_port}\r\n"
        await loop.sock_sendall(sock, f"{request}{self.header_lines()}\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await loop.sock_recv(sock, 4096)
            if not chunk or len(head) > MAX_HEAD_BYTES:
                raise ConnectFailed("the proxy closed the tunnel before answering")
            head += chunk
        status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        if status_line.split(" ")[1:2] != ["200"]:
            raise ConnectFailed(f"the proxy refused the tunnel: {status_line[:200]}")
        if not head.endswith(b"\r\n\r\n"):
            raise ConnectFailed("the proxy sent data after its CONNECT reply")
