"""`store.redis_url` forms, parsed without importing redis (the config validates with this). Pure.

    redis://[[user]:password@]host[:6379][/db][?option=value&...]    plain TCP
    rediss://[[user]:password@]host[:6379][/db][?...]                TLS
    unix://[[user]:password@]/path/to/redis.sock[?db=N]              unix socket
    redis+sentinel://[[user]:password@]host[:26379][,host[:26379]...]/service[/db][?...]
    rediss+sentinel://...                                            TLS to master, replicas and sentinels
    redis+cluster://[[user]:password@]host[:6379][,host[:6379]...][?...]
    rediss+cluster://...                                             TLS

The standalone forms go to redis-py's `from_url` as they are (any of its query options).
The Sentinel and Cluster forms take `sentinel_username`, `sentinel_password` (Sentinel
only: the sentinels' own credentials), `ssl_ca_certs` and `ssl_cert_reqs`; their userinfo
holds the data nodes' credentials. User, password and query values are percent-decoded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote

STANDALONE_SCHEMES = ("redis://", "rediss://", "unix://")
SENTINEL_SCHEMES = ("redis+sentinel://", "rediss+sentinel://")
CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")
SCHEMES = STANDALONE_SCHEMES + SENTINEL_SCHEMES + CLUSTER_SCHEMES

SENTINEL_PORT = 26379
REDIS_PORT = 6379
MULTI_HOST_OPTIONS = frozenset({"sentinel_username", "sentinel_password", "ssl_ca_certs", "ssl_cert_reqs"})


class StoreUrlError(ValueError):
    """A redis_url the gateway cannot use; the message says why (never with the password)."""


@dataclass(frozen=True, slots=True)
class MultiHostUrl:
    """A parsed Sentinel or Cluster URL."""

    tls: bool
    hosts: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None
    service: str | None = None  # Sentinel: the monitored master's name
    db: int = 0
    options: dict[str, str] = field(default_factory=dict)


def check_store_url(url: str) -> None:
    """Raise StoreUrlError for a URL that `create_client` would refuse."""
    if url.startswith(SENTINEL_SCHEMES):
        parse_multi_host(url, default_port=SENTINEL_PORT, sentinel=True)
    elif url.startswith(CLUSTER_SCHEMES):
        parse_multi_host(url, default_port=REDIS_PORT, sentinel=False)
    elif not url.startswith(STANDALONE_SCHEMES):
        raise StoreUrlError(f"must be a {', '.join(SCHEMES)} URL")


def parse_multi_host(url: str, *, default_port: int, sentinel: bool) -> MultiHostUrl:
    """Split a Sentinel or Cluster URL (urllib cannot: its netloc holds several hosts)."""
    scheme, _, rest = url.partition("://")
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    userinfo, at, hostlist = netloc.rpartition("@")
    username, password = _credentials(userinfo) if at else (None, None)
    hosts = tuple(_host_port(item, default_port) for item in hostlist.split(",") if item)
    if not hosts:
        raise StoreUrlError("no host in the URL")
    options = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - MULTI_HOST_OPTIONS)
    if unknown:
        raise StoreUrlError(f"unknown option {unknown[0]!r}")
    service, db = _sentinel_path(path) if sentinel else (None, _cluster_path(path))
    return MultiHostUrl(tls=scheme.startswith("rediss"), hosts=hosts, username=username, password=password,
                        service=service, db=db, options=options)


def _credentials(userinfo: str) -> tuple[str | None, str | None]:
    user, colon, password = userinfo.partition(":")
    return (unquote(user) or None, unquote(password) if colon else None)


def _host_port(item: str, default_port: int) -> tuple[str, int]:
    if item.startswith("["):  # [IPv6]:port
        host, _, port = item[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = item.partition(":")
    if not host:
        raise StoreUrlError("empty host in the URL")
    if not port:
        return host, default_port
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise StoreUrlError(f"bad port for host {host!r}")
    return host, int(port)


def _sentinel_path(path: str) -> tuple[str, int]:
    service, _, db = path.partition("/")
    if not service:
        raise StoreUrlError("the Sentinel URL needs the master's name: redis+sentinel://host:26379/mymaster")
    return unquote(service), _db(db.strip("/"))


def _cluster_path(path: str) -> int:
    if _db(path.strip("/")) != 0:
        raise StoreUrlError("Redis Cluster has database 0 only")
    return 0


def _db(text: str) -> int:
    if not text:
        return 0
    if not text.isdigit():
        raise StoreUrlError(f"bad database number {text!r}")
    return int(text)
