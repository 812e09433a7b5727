"""The upstream HTTP client interface: one `send`, its errors, and the rules every client shares.

Two implementations sit behind it: the hand-written httptools client (upstream/http/builtin.py,
the default, chosen for its CPU cost per call) and aiohttp's client (upstream/http/aiohttp_client.py,
the reference). One contract suite (tests/upstream/test_client_contract.py) runs against both,
so the choice is one config key (`upstream.http_client`).

Rules both follow, so that a backend cannot break the gateway for everyone:
- a reply head is bounded (MAX_HEADERS fields, MAX_FIELD_BYTES per field, MAX_HEAD_BYTES in
  all); past that the reply is `BadReply`;
- 1xx interim replies are skipped; the final reply is the one handed over;
- a pooled connection the server has closed meanwhile is not used (the builtin client looks
  at the socket before reusing it, even while a busy event loop has not noticed the close);
- a reused connection that fails before one byte of the reply is retried once on a fresh one
  when that cannot repeat work: for GET and DELETE, and for any method when the server reset
  the connection (its kernel had our request unread). A reused connection closed cleanly
  after the request went out is NOT retried for POST: the backend may have acted on it (a
  tools/call is never sent twice);
- a same-origin 307/308 is followed once; any other redirect is an error naming its Location;
- gzip and deflate bodies are decoded (`Accept-Encoding` says so).
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar
from urllib.parse import urljoin, urlsplit

T = TypeVar("T")

USER_AGENT = "mcp-gateway"
ACCEPT_ENCODING = "gzip, deflate"
MAX_HEADERS = 128
"""Header fields in one reply head (aiohttp's limit too)."""
MAX_FIELD_BYTES = 8190
"""Bytes in one header field, name and value (aiohttp's limit too)."""
MAX_HEAD_BYTES = 64 * 1024
"""Bytes of a whole reply head, status line included."""
IDLE_SECONDS = 4.0
"""A pooled connection idle longer than this is closed. Below uvicorn's and Node's 5 s
keep-alive; a server that closes sooner (gunicorn: 2 s) costs one transparent retry."""
IDEMPOTENT = frozenset(("GET", "HEAD", "OPTIONS", "DELETE", "PUT"))
"""Methods a client may repeat on its own (RFC 9110 §9.2.2)."""
REDIRECTS = (307, 308)
"""The redirects that keep method and body, so a POST may follow them."""


class TransportFailed(Exception):
    """The exchange broke after the request may have been sent."""


class ConnectFailed(TransportFailed):
    """No connection could be opened: the request was never sent."""


class ConnectionReset(TransportFailed):
    """The server reset the connection (RST): data we sent was never read by its application."""


class BadReply(TransportFailed):
    """The backend's reply breaks HTTP or the client's limits (head too large, bad redirect)."""


TRANSPORT_ERRORS = (TransportFailed, OSError)
"""What `HttpTransport.send` raises when the exchange fails: refused, reset, DNS, malformed replies, broken streams."""


class Response(Protocol):
    """A reply whose head has arrived; the body is read with `read()` or `chunks()`."""

    status: int
    headers: Mapping[str, str]  # names lower-cased; repeated headers joined with ", "
    content_type: str  # lower-cased, without parameters
    content_length: int | None  # of the decoded body, None when unknown

    async def read(self) -> bytes: ...

    def chunks(self) -> AsyncIterator[bytes]: ...


Consume = Callable[[Response], Awaitable[T]]


class HttpTransport(Protocol):
    """Requests to one backend URL over pooled keep-alive connections."""

    async def send(self, method: str, headers: Mapping[str, str], body: bytes | None, consume: Consume[T]) -> T:
        """Send one request; return what `consume` makes of its reply (head in, body unread).

        A reply `consume` leaves half-read, or that fails or is cancelled, closes its connection.
        """
        ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """How one backend is reached, beyond its URL (from the backend's config)."""

    max_connections: int = 100
    tls: ssl.SSLContext | None = None  # None: the system's trust store
    proxy_from_env: bool = False  # honour HTTPS_PROXY / HTTP_PROXY / NO_PROXY
    idle_seconds: float = IDLE_SECONDS


@dataclass(frozen=True, slots=True)
class Target:
    """Where requests go, parsed once from the backend's URL."""

    url: str
    host: str
    port: int
    path: str  # with the query, as sent on the request line
    authority: str  # the Host header
    tls: ssl.SSLContext | None

    @classmethod
    def parse(cls, url: str, tls: ssl.SSLContext | None = None) -> Target:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url}")
        context = (tls or ssl.create_default_context()) if parts.scheme == "https" else None
        port = parts.port or (443 if context else 80)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = parts.hostname
        authority = f"[{host}]" if ":" in host else host
        if parts.port:
            authority += f":{parts.port}"
        return cls(url, host, port, path, authority, context)

    @property
    def host_port(self) -> str:
        """host:port, the port always written (a CONNECT request's target)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def url_for(self, path: str) -> str:
        """The absolute URL of `path` on this target's origin."""
        return f"{'https' if self.tls else 'http'}://{self.authority}{path}"

    def origin(self) -> tuple[str, str, int]:
        return ("https" if self.tls else "http", self.host, self.port)


def redirect_path(target: Target, status: int, location: str | None) -> str:
    """The path a 3xx reply sends us to, if we may follow it; else `BadReply` naming why.

    Only 307/308 keep the method and body, and only a same-origin Location keeps the
    backend's credentials with the backend they were configured for.
    """
    if not location:
        raise BadReply(f"HTTP {status} redirect without a Location")
    try:
        moved: Target | None = Target.parse(urljoin(target.url, location), target.tls)
    except ValueError:  # not http(s), or not a URL at all
        moved = None
    if status not in REDIRECTS or moved is None or moved.origin() != target.origin():
        raise BadReply(f"HTTP {status} redirect to {location} not followed (only same-origin 307/308 are)")
    return moved.path

