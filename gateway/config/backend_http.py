"""What an HTTP backend's config may say: its URL and its TLS files (checked at load).

Rules over plain values, raising `ValueError` with the reason; gateway.config.sections adds
the key path. Anything the upstream client could not use is refused here, at `check-config` and
at start, rather than failing calls later.
"""

from __future__ import annotations

import re
import ssl
from urllib.parse import urlsplit

from gateway.config.model import TlsConfig

HTTP_CLIENTS = ("builtin", "aiohttp")
"""`upstream.http_client`: the hand-written httptools client (default) or aiohttp's (the reference)."""
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
URL_FORBIDDEN = re.compile(r"[\s\x00-\x1f\x7f]")


def check_backend_url(url: str) -> None:
    """An absolute http(s) URL with a host, no credentials, a valid port, no spaces or fragment."""
    if URL_FORBIDDEN.search(url):
        raise ValueError("must not contain spaces or control characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("required, an http:// or https:// URL")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not carry user:password@ (send credentials with `headers`)")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("the port must be a number from 1 to 65535") from None
    if port == 0:
        raise ValueError("the port must be a number from 1 to 65535")
    if parts.fragment:
        raise ValueError("must not have a #fragment")


def check_jwks_url(url: str) -> None:
    """Keys fetched over plain http could be swapped on the way: only https, or http to this host."""
    parts = urlsplit(url)
    loopback = parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS
    if not parts.hostname or not (parts.scheme == "https" or loopback):
        raise ValueError("must be an https:// URL (http:// only on a loopback host)")


def tls_context(tls: TlsConfig) -> ssl.SSLContext:
    """A verifying client context from a backend's TLS files; `ValueError` naming the file that cannot be used."""
    try:
        context = ssl.create_default_context(cafile=tls.ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"ca_file {tls.ca_file}: cannot be loaded ({_reason(exc)})") from None
    if tls.cert_file is not None:
        try:
            context.load_cert_chain(tls.cert_file, tls.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"cert_file/key_file: cannot be loaded ({_reason(exc)})") from None
    return context


def _reason(exc: OSError) -> str:
    return str(getattr(exc, "reason", None) or exc.strerror or exc)
