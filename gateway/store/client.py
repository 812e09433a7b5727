"""The Redis client for `store.redis_url`: standalone, TLS, unix socket, Sentinel or Cluster.

The URL forms are documented in `gateway.config.redis_urls`. One client per process owns the one
connection pool every store shares (forked workers each make their own, after the fork).
redis-py parses replies with hiredis whenever the `hiredis` package is installed (our
dependency is `redis[hiredis]`). Socket timeouts are short and a failed command is retried
once at once (a pooled socket that went stale), so a dead Redis fails fast and the gateway
falls back to local state instead of stalling requests.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.utils import HIREDIS_AVAILABLE

from gateway.config.redis_urls import (
    CLUSTER_SCHEMES,
    REDIS_PORT,
    SENTINEL_PORT,
    SENTINEL_SCHEMES,
    MultiHostUrl,
    check_store_url,
    parse_multi_host,
)

SOCKET_TIMEOUT_SECONDS = 0.5
"""A reply slower than this counts as a failure (Redis answers in well under a millisecond)."""

CONNECT_TIMEOUT_SECONDS = 0.5


def uses_hiredis() -> bool:
    """Whether replies are parsed by hiredis (C) rather than in Python."""
    return bool(HIREDIS_AVAILABLE)


def connection_options(*, tcp: bool = True) -> dict[str, Any]:
    """Options for every data connection: short timeouts, one immediate retry; TCP keepalive on TCP."""
    options: dict[str, Any] = {"socket_timeout": SOCKET_TIMEOUT_SECONDS,
                               "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS, "retry": Retry(NoBackoff(), 1)}
    if tcp:  # unix sockets refuse the option
        options["socket_keepalive"] = True
    return options


def create_client(url: str) -> Any:
    """A redis.asyncio client (Redis or RedisCluster) for `url`; nothing connects until first use."""
    check_store_url(url)
    if url.startswith(SENTINEL_SCHEMES):
        return _sentinel_client(parse_multi_host(url, default_port=SENTINEL_PORT, sentinel=True))
    if url.startswith(CLUSTER_SCHEMES):
        return _cluster_client(parse_multi_host(url, default_port=REDIS_PORT, sentinel=False))
    return Redis.from_url(url, **connection_options(tcp=not url.startswith("unix://")))


def _sentinel_client(parsed: MultiHostUrl) -> Redis:
    tls = _tls_options(parsed)
    sentinel_auth = {"username": parsed.options.get("sentinel_username"),
                     "password": parsed.options.get("sentinel_password")}
    # Sentinels often have no password, or another one than the master's: they get their own options.
    sentinel_kwargs = {"socket_timeout": SOCKET_TIMEOUT_SECONDS, "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
                       **{k: v for k, v in sentinel_auth.items() if v is not None}, **tls}
    sentinel = Sentinel(list(parsed.hosts), sentinel_kwargs=sentinel_kwargs)
    return sentinel.master_for(parsed.service or "", db=parsed.db, username=parsed.username,
                               password=parsed.password, **connection_options(), **tls)


def _cluster_client(parsed: MultiHostUrl) -> RedisCluster:
    nodes = [ClusterNode(host, port) for host, port in parsed.hosts]
    return RedisCluster(startup_nodes=nodes, username=parsed.username, password=parsed.password,
                        **connection_options(), **_tls_options(parsed))


def _tls_options(parsed: MultiHostUrl) -> dict[str, Any]:
    if not parsed.tls:
        return {}
    options: dict[str, Any] = {"ssl": True}
    for key in ("ssl_ca_certs", "ssl_cert_reqs"):
        if key in parsed.options:
            options[key] = parsed.options[key]
    return options
