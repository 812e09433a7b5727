"""One builder per config section: read it, check its values, and check what refers across sections."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from gateway.config.audit import audit_section
from gateway.config.audit_model import AuditConfig
from gateway.config.auth import auth_section, scopes
from gateway.config.backend_http import HTTP_CLIENTS, LOOPBACK_HOSTS, check_backend_url, tls_context
from gateway.config.integrity import INTEGRITY_MODES, INVISIBLE_ACTIONS, NEW_ITEMS, BackendIntegrity, IntegrityConfig
from gateway.config.model import (
    BACKEND_PROTOCOLS,
    AdminConfig,
    AuthConfig,
    Backend,
    BackendAuth,
    BackendConfig,
    CatalogueConfig,
    CircuitConfig,
    Config,
    HttpBackend,
    LoggingConfig,
    MetricsConfig,
    MrtrConfig,
    OAuthConfig,
    SearchConfig,
    ServerConfig,
    StdioBackend,
    StoreConfig,
    TenantLimits,
    TlsConfig,
    TracingConfig,
    UpstreamConfig,
)
from gateway.config.outbound import backend_auth, check_outbound, oauth_section
from gateway.config.reader import ConfigError, Section, read
from gateway.config.redis_urls import SCHEMES as STORE_SCHEMES
from gateway.config.redis_urls import StoreUrlError, check_store_url
from gateway.config.rules import check_rule_backends, rules_section
from gateway.config.servers import check_servers, servers_section
from gateway.config.tenants import limits_section, tenants_section
from gateway.config.tracing import tracing_section

P = TypeVar("P", int, int | None)

BACKEND_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
NAMESPACE = re.compile(r"^[A-Za-z0-9_.-]{0,32}$")
SEPARATOR = re.compile(r"[A-Za-z0-9_.-]{1,4}")
READY_REQUIRES = ("any_backend", "none")
"""any_backend: not ready while no backend answers its tools/list; none: backends do not count."""
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("auto", "json", "console")
MAX_RETRIES = 5
BACKEND_TYPES: dict[str, type[HttpBackend] | type[StdioBackend]] = {"http": HttpBackend, "stdio": StdioBackend}
TRANSPORT_KEYS = {"http": ("url", "headers", "max_connections", "identity_headers", "tls", "proxy_from_env",
                           "idle_seconds"),
                  "stdio": ("command", "env", "cwd")}
"""Keys of one transport; a backend of the other accepts and ignores them, as before the types were split."""


def build_config(root: Section) -> Config:
    limits = read(root.section("limits", TenantLimits), limits_section(TenantLimits()))
    rules = rules_section(root, gateway_wide=True)
    config = Config(
        server=read(root.section("server", ServerConfig), _server),
        store=read(root.section("store", StoreConfig), _store),
        auth=read(root.section("auth", AuthConfig), auth_section),
        catalogue=read(root.section("catalogue", CatalogueConfig), _catalogue),
        backends=_backends(root),
        upstream=read(root.section("upstream", UpstreamConfig), _upstream),
        tenants=tenants_section(root, limits, rules),
        rules=rules,
        limits=limits,
        admin=read(root.section("admin", AdminConfig), _admin),
        metrics=read(root.section("metrics", MetricsConfig), _metrics),
        logging=read(root.section("logging", LoggingConfig), _logging),
        mrtr=read(root.section("mrtr", MrtrConfig), _mrtr),
        tracing=read(root.section("tracing", TracingConfig), tracing_section),
        oauth=read(root.section("oauth", OAuthConfig), oauth_section),
        integrity=read(root.section("integrity", IntegrityConfig),
                       lambda s: IntegrityConfig(lockfile=s.get("lockfile", str) or None)),
        audit=read(root.section("audit", AuditConfig), audit_section),
        servers=servers_section(root),
    )
    root.done()
    _check_references(config)
    if config.audit.enabled and config.audit.redis and not (config.audit.redis_url or config.store.redis_url):
        raise ConfigError("audit.redis: needs audit.redis_url or store.redis_url")
    return config


def _server(s: Section) -> ServerConfig:
    path = s.get("path", str)
    if not path.startswith("/"):
        raise ConfigError(f"{s.where('path')}: must start with /")
    ready_requires = s.get("ready_requires", str)
    if ready_requires not in READY_REQUIRES:
        raise ConfigError(f"{s.where('ready_requires')}: must be {' or '.join(READY_REQUIRES)}")
    return ServerConfig(
        host=s.get("host", str),
        port=_checked_port(s, s.integer("port")),
        path=path,
        max_body_bytes=s.integer("max_body_bytes", minimum=1024),
        allowed_origins=s.strings("allowed_origins"),
        shutdown_grace_seconds=s.number("shutdown_grace_seconds"),
        public_url=s.get("public_url", str),
        ready_requires=ready_requires,
        headers_timeout_seconds=s.number("headers_timeout_seconds", minimum=0.1),
        body_timeout_seconds=s.number("body_timeout_seconds", minimum=0.1),
        idle_timeout_seconds=s.number("idle_timeout_seconds", minimum=0.1),
        write_timeout_seconds=s.number("write_timeout_seconds", minimum=0.1),
        max_connections=s.integer("max_connections", minimum=1),
        session_idle_seconds=s.number("session_idle_seconds", minimum=1.0),
    )


def _metrics(s: Section) -> MetricsConfig:
    token = s.get("token", str) or None
    if token is not None and len(token) < 16:
        raise ConfigError(f"{s.where('token')}: must be at least 16 characters")
    return MetricsConfig(port=_checked_port(s, s.optional_integer("port", minimum=1)), token=token)


def _mrtr(s: Section) -> MrtrConfig:
    secret = s.get("secret", str)
    if secret is not None and len(secret.encode()) < 32:  # "" too: a blank "${VAR:-}" is no key
        raise ConfigError(f"{s.where('secret')}: must be at least 32 bytes, or null")
    return MrtrConfig(round_seconds=s.number("round_seconds", minimum=1.0),
                      max_rounds=s.integer("max_rounds", minimum=1), secret=secret)


def _admin(s: Section) -> AdminConfig:
    return AdminConfig(scope=s.get("scope", str), refresh_interval_seconds=s.number("refresh_interval_seconds"),
                       status_page=s.get("status_page", bool))


def _checked_port(s: Section, port: P) -> P:
    if port is not None and port > 65535:
        raise ConfigError(f"{s.where('port')}: must be a port number (0-65535)")
    return port


def _store(s: Section) -> StoreConfig:
    url = s.get("redis_url", str)
    if url and not url.startswith(STORE_SCHEMES):  # Sentinel and Cluster forms too: gateway.config.redis_urls
        raise ConfigError(f"{s.where('redis_url')}: must be a redis://, rediss:// or unix:// URL")
    try:
        check_store_url(url or "redis://")
    except StoreUrlError as exc:
        raise ConfigError(f"{s.where('redis_url')}: {exc}") from exc
    return StoreConfig(redis_url=url or None, key_prefix=s.get("key_prefix", str), required=s.get("required", bool))


def _catalogue(s: Section) -> CatalogueConfig:
    separator = s.get("separator", str)
    if not SEPARATOR.fullmatch(separator):
        raise ConfigError(f"{s.where('separator')}: must be 1-4 of A-Z a-z 0-9 _ . -")
    return CatalogueConfig(
        separator=separator,
        refresh_seconds=s.number("refresh_seconds", minimum=0.05),
        max_stale_seconds=s.number("max_stale_seconds"),
        validate_arguments=s.get("validate_arguments", bool),
        page_size=s.integer("page_size", minimum=1),
        search=read(s.section("search", SearchConfig), _search),
    )


def _search(s: Section) -> SearchConfig:
    results, most = s.integer("results", minimum=1), s.integer("max_results", minimum=1)
    if results > most:
        raise ConfigError(f"{s.where('results')}: must not exceed max_results ({most})")
    return SearchConfig(results=results, max_results=most, max_bytes=s.integer("max_bytes", minimum=1024))


def _backends(root: Section) -> tuple[Backend, ...]:
    backends = tuple(read(item, _backend) for item in root.items("backends", BackendConfig))
    seen: set[str] = set()
    for i, backend in enumerate(backends):
        if backend.name in seen:
            raise ConfigError(f"backends[{i}].name: duplicate backend {backend.name!r}")
        seen.add(backend.name)
    return backends


def _backend(s: Section) -> Backend:
    name = s.required("name", str)
    if not BACKEND_NAME.fullmatch(name):
        raise ConfigError(f"{s.where('name')}: must match {BACKEND_NAME.pattern}")
    transport = s.required("transport", str)
    if transport not in BACKEND_TYPES:
        raise ConfigError(f"{s.where('transport')}: must be http or stdio")
    s.model = BACKEND_TYPES[transport]
    namespace = s.get("namespace", str)
    namespace = name if namespace is None else namespace
    if not NAMESPACE.fullmatch(namespace):
        raise ConfigError(f"{s.where('namespace')}: must match {NAMESPACE.pattern}")
    for other, keys in TRANSPORT_KEYS.items():
        if other != transport:
            s.ignore(*keys)
    if transport == "stdio" and s.data.get("auth") is not None:
        raise ConfigError(f"{s.where('auth')}: only http backends are sent credentials")
    common = {"name": name, "namespace": namespace, **_backend_limits(s)}
    return _http_backend(s, common) if transport == "http" else _stdio_backend(s, common)


def _http_backend(s: Section, common: dict[str, Any]) -> HttpBackend:
    url = s.get("url", str)
    s.check("url", check_backend_url, url or "")
    return HttpBackend(url=url, headers=s.header_map("headers"), identity_headers=s.get("identity_headers", bool),
                       max_connections=s.integer("max_connections", minimum=1), tls=_tls(s),
                       proxy_from_env=s.get("proxy_from_env", bool),
                       idle_seconds=s.number("idle_seconds", minimum=0.01), auth=_auth(s), **common)


def _auth(backend: Section) -> BackendAuth | None:
    s = backend.section("auth", BackendAuth)
    return read(s, backend_auth) if s.data else None


def _tls(backend: Section) -> TlsConfig | None:
    s = backend.section("tls", TlsConfig)
    if not s.data:
        return None
    tls = read(s, lambda t: TlsConfig(ca_file=t.get("ca_file", str), cert_file=t.get("cert_file", str),
                                      key_file=t.get("key_file", str)))
    if tls.key_file is not None and tls.cert_file is None:
        raise ConfigError(f"{s.where('cert_file')}: required with key_file")
    try:
        tls_context(tls)  # unreadable or malformed files fail here, not at the first call
    except ValueError as exc:
        raise ConfigError(f"{s.path}: {exc}") from None
    return tls


def _upstream(s: Section) -> UpstreamConfig:
    kind = s.get("http_client", str)
    if kind not in HTTP_CLIENTS:
        raise ConfigError(f"{s.where('http_client')}: must be one of {', '.join(HTTP_CLIENTS)}")
    return UpstreamConfig(http_client=kind)


def _stdio_backend(s: Section, common: dict[str, Any]) -> StdioBackend:
    command = s.strings("command")
    if not command:
        raise ConfigError(f"{s.where('command')}: required for transport stdio")
    return StdioBackend(command=command, env=s.string_map("env"), cwd=s.get("cwd", str), **common)


def _backend_limits(s: Section) -> dict[str, Any]:
    timeout = s.number("timeout_seconds", minimum=0.001)
    cap = s.get("max_call_seconds", float)
    if cap is not None and cap < timeout:
        raise ConfigError(f"{s.where('max_call_seconds')}: must be a number >= timeout_seconds ({timeout:g})")
    return {
        "timeout_seconds": timeout,
        "max_concurrency": s.integer("max_concurrency", minimum=1),
        "max_queue": s.integer("max_queue", minimum=0),
        "max_response_bytes": s.integer("max_response_bytes", minimum=1024),
        "max_call_seconds": cap,
        "retries": min(s.integer("retries", minimum=0), MAX_RETRIES),
        "circuit": read(s.section("circuit", CircuitConfig), _circuit),
        "protocol": _protocol(s),
        "required_scopes": scopes(s, "required_scopes"),
        "integrity": read(s.section("integrity", BackendIntegrity), _integrity),
    }


def _integrity(s: Section) -> BackendIntegrity:
    return BackendIntegrity(mode=_choice(s, "mode", INTEGRITY_MODES), new_items=_choice(s, "new_items", NEW_ITEMS),
                            invisible=_choice(s, "invisible", INVISIBLE_ACTIONS))


def _choice(s: Section, key: str, allowed: tuple[str, ...]) -> str:
    """One of `allowed`; YAML reads an unquoted `off` as false, which means "off" here."""
    s.seen.add(key)
    value = s.data.get(key, s.default(key))
    value = "off" if value is False and "off" in allowed else value
    if value not in allowed:
        raise ConfigError(f"{s.where(key)}: must be one of {', '.join(allowed)}")
    return str(value)


def _protocol(s: Section) -> str:
    """YAML reads `2026` as a number: the era's name either way."""
    s.seen.add("protocol")
    protocol = s.data.get("protocol", "auto")
    if isinstance(protocol, bool) or str(protocol) not in BACKEND_PROTOCOLS:
        raise ConfigError(f"{s.where('protocol')}: must be one of {', '.join(BACKEND_PROTOCOLS)}")
    return str(protocol)


def _circuit(s: Section) -> CircuitConfig:
    ratio = s.number("failure_ratio")
    if ratio > 1:
        raise ConfigError(f"{s.where('failure_ratio')}: must be a number between 0 and 1")
    return CircuitConfig(
        failures=s.integer("failures", minimum=0),
        failure_ratio=ratio,
        min_calls=s.integer("min_calls", minimum=1),
        window_seconds=s.number("window_seconds", minimum=0.01),
        cooldown_seconds=s.number("cooldown_seconds", minimum=0.01),
    )


def _logging(s: Section) -> LoggingConfig:
    level = s.get("level", str).lower()
    fmt = s.get("format", str)
    if level not in LOG_LEVELS:
        raise ConfigError(f"{s.where('level')}: must be debug, info, warning or error")
    if fmt not in LOG_FORMATS:
        raise ConfigError(f"{s.where('format')}: must be auto, json or console")
    return LoggingConfig(level=level, format=fmt)


def _check_references(config: Config) -> None:
    names = {b.name for b in config.backends}
    for tenant in config.tenants.values():
        for i, backend in enumerate(tenant.backends):
            if backend != "*" and backend not in names:
                raise ConfigError(f"tenants.{tenant.name}.backends[{i}]: unknown backend {backend!r}")
        for backend in tenant.backend_headers:
            if backend not in names:
                raise ConfigError(f"tenants.{tenant.name}.backend_headers.{backend}: unknown backend")
        check_rule_backends(tenant.rules, names)
    check_rule_backends(config.rules, names)
    check_servers(dict(config.servers), names, set(config.tenants))
    for i, key in enumerate(config.auth.api_keys):
        if key.tenant not in config.tenants:
            raise ConfigError(f"auth.api_keys[{i}].tenant: unknown tenant {key.tenant!r}")
    anonymous = config.auth.anonymous_tenant
    if anonymous is not None and anonymous not in config.tenants:
        raise ConfigError(f"auth.anonymous_tenant: unknown tenant {anonymous!r}")
    _check_audience(config)
    check_outbound(config)


def _check_audience(config: Config) -> None:
    """An OAuth token must be for this gateway: off loopback, its URL cannot come from a Host header,
    which anyone may set to the resource a token they hold was issued for."""
    jwt, server = config.auth.jwt, config.server
    if jwt.oauth and jwt.audience is None and server.public_url is None and server.host not in LOOPBACK_HOSTS:
        raise ConfigError("auth.jwt.audience: required for OAuth tokens unless server.public_url names the "
                          "gateway (the resource URL tokens must be issued for)")
