"""One builder per config section: read it, check its values, and check what refers across sections."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from gateway.config.backend_http import HTTP_CLIENTS, check_backend_url, check_jwks_url, tls_context
from gateway.config.model import (
    BACKEND_PROTOCOLS,
    AdminConfig,
    ApiKeyConfig,
    AuthConfig,
    Backend,
    BackendConfig,
    CatalogueConfig,
    CircuitConfig,
    Config,
    HttpBackend,
    JwtConfig,
    LoggingConfig,
    MetricsConfig,
    MrtrConfig,
    ResourceMetadataConfig,
    ServerConfig,
    StdioBackend,
    StoreConfig,
    TenantLimits,
    TlsConfig,
    UpstreamConfig,
)
from gateway.config.reader import ConfigError, Section, read
from gateway.config.redis_urls import SCHEMES as STORE_SCHEMES
from gateway.config.redis_urls import StoreUrlError, check_store_url
from gateway.config.tenants import limits_section, tenants_section

P = TypeVar("P", int, int | None)

BACKEND_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
NAMESPACE = re.compile(r"^[A-Za-z0-9_.-]{0,32}$")
SEPARATOR = re.compile(r"[A-Za-z0-9_.-]{1,4}")
TOKEN_SOURCES = ("header", "query", "params")
JWT_ALGORITHMS = ("HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "PS256", "PS384",
                  "PS512", "ES256", "ES384", "ES512", "EdDSA")
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
    config = Config(
        server=read(root.section("server", ServerConfig), _server),
        store=read(root.section("store", StoreConfig), _store),
        auth=read(root.section("auth", AuthConfig), _auth),
        catalogue=read(root.section("catalogue", CatalogueConfig), _catalogue),
        backends=_backends(root),
        upstream=read(root.section("upstream", UpstreamConfig), _upstream),
        tenants=tenants_section(root, limits),
        limits=limits,
        admin=read(root.section("admin", AdminConfig), _admin),
        metrics=read(root.section("metrics", MetricsConfig), _metrics),
        logging=read(root.section("logging", LoggingConfig), _logging),
        mrtr=read(root.section("mrtr", MrtrConfig), _mrtr),
    )
    root.done()
    _check_references(config)
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
    return AdminConfig(scope=s.get("scope", str), refresh_interval_seconds=s.number("refresh_interval_seconds"))


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


def _auth(s: Section) -> AuthConfig:
    sources = s.strings("token_sources")
    for i, source in enumerate(sources):
        if source not in TOKEN_SOURCES:
            raise ConfigError(f"{s.where('token_sources')}[{i}]: must be one of {', '.join(TOKEN_SOURCES)}")
    return AuthConfig(
        token_sources=sources,
        query_param=s.get("query_param", str),
        jwt=read(s.section("jwt", JwtConfig), _jwt),
        api_keys=tuple(read(item, _api_key) for item in s.items("api_keys", ApiKeyConfig)),
        resource_metadata=read(s.section("resource_metadata", ResourceMetadataConfig), _resource_metadata),
        anonymous_tenant=s.get("anonymous_tenant", str),
        max_token_bytes=s.integer("max_token_bytes", minimum=256),
    )


def _jwt(s: Section) -> JwtConfig:
    algorithms = _algorithms(s)
    if s.data.get("secret") == "":  # e.g. "${VAR:-}"; blank overrides are refused in gateway.config.overrides
        raise ConfigError(f"{s.where('secret')}: empty; give it a value, or null for no HS secret")
    jwt = JwtConfig(
        algorithms=algorithms,
        secret=s.get("secret", str),
        public_key_file=s.get("public_key_file", str),
        jwks_url=s.get("jwks_url", str),
        issuer=s.get("issuer", str),
        audience=s.get("audience", str),
        leeway_seconds=s.number("leeway_seconds"),
        jwks_cache_seconds=s.number("jwks_cache_seconds", minimum=1.0),
        tenant_claim=s.get("tenant_claim", str),
        subject_claim=s.get("subject_claim", str),
        scope_claim=s.get("scope_claim", str),
        max_lifetime_seconds=s.number("max_lifetime_seconds", minimum=1.0),
    )
    if jwt.jwks_url is not None:
        _checked(s, "jwks_url", check_jwks_url, jwt.jwks_url)
    if any(not a.startswith("HS") for a in algorithms) and not (jwt.public_key_file or jwt.jwks_url):
        raise ConfigError(f"{s.where('public_key_file')}: required (or jwks_url) for {algorithms[0]}")
    if jwt.secret is not None and len(jwt.secret.encode()) < 32:
        raise ConfigError(f"{s.where('secret')}: must be at least 32 bytes")
    return jwt


def _algorithms(s: Section) -> tuple[str, ...]:
    algorithms = s.strings("algorithms")
    for i, alg in enumerate(algorithms):
        if alg not in JWT_ALGORITHMS:
            raise ConfigError(f"{s.where('algorithms')}[{i}]: unsupported algorithm {alg!r}")
    hmac = any(a.startswith("HS") for a in algorithms)
    if hmac and any(not a.startswith("HS") for a in algorithms):
        # Mixing lets a public key double as an HMAC secret (algorithm confusion).
        raise ConfigError(f"{s.where('algorithms')}: do not mix HS* with asymmetric algorithms")
    return algorithms


def _api_key(s: Section) -> ApiKeyConfig:
    digest = s.required("sha256", str).lower()
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise ConfigError(f"{s.where('sha256')}: must be 64 hex digits")
    return ApiKeyConfig(sha256=digest, tenant=s.required("tenant", str), subject=s.required("subject", str),
                        scopes=s.strings("scopes"))


def _resource_metadata(s: Section) -> ResourceMetadataConfig:
    return ResourceMetadataConfig(authorization_servers=s.strings("authorization_servers"),
                                  scopes_supported=s.strings("scopes_supported"))


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
    )


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
    common = {"name": name, "namespace": namespace, **_backend_limits(s)}
    return _http_backend(s, common) if transport == "http" else _stdio_backend(s, common)


def _http_backend(s: Section, common: dict[str, Any]) -> HttpBackend:
    url = s.get("url", str)
    _checked(s, "url", check_backend_url, url or "")
    return HttpBackend(url=url, headers=s.header_map("headers"), identity_headers=s.get("identity_headers", bool),
                       max_connections=s.integer("max_connections", minimum=1), tls=_tls(s),
                       proxy_from_env=s.get("proxy_from_env", bool),
                       idle_seconds=s.number("idle_seconds", minimum=0.01), **common)


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


def _checked(s: Section, key: str, check: Callable[[str], None], value: str) -> None:
    """Run a rule of gateway.config.backend_http on `value`, its complaint prefixed with the key path."""
    try:
        check(value)
    except ValueError as exc:
        raise ConfigError(f"{s.where(key)}: {exc}") from None


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
    }


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
    for i, key in enumerate(config.auth.api_keys):
        if key.tenant not in config.tenants:
            raise ConfigError(f"auth.api_keys[{i}].tenant: unknown tenant {key.tenant!r}")
    anonymous = config.auth.anonymous_tenant
    if anonymous is not None and anonymous not in config.tenants:
        raise ConfigError(f"auth.anonymous_tenant: unknown tenant {anonymous!r}")
