"""Which HTTP client carries a backend's requests (`upstream.http_client`), made from its options."""

from __future__ import annotations

from gateway.config.backend_http import HTTP_CLIENTS
from gateway.upstream.http.aiohttp_client import AiohttpClient
from gateway.upstream.http.builtin import HttpClient
from gateway.upstream.http.client import ClientOptions, HttpTransport

__all__ = ["HTTP_CLIENTS", "open_client"]


def open_client(kind: str, url: str, options: ClientOptions) -> HttpTransport:
    """A client for `url`; no connection is made until the first request."""
    if kind == "aiohttp":
        return AiohttpClient(url, options)
    if kind == "builtin":
        return HttpClient(url, options)
    raise ValueError(f"unknown upstream HTTP client {kind!r} (one of {', '.join(HTTP_CLIENTS)})")
