"""Configuration: YAML in, frozen typed objects out, parsed once at start.

`${VAR}` and `${VAR:-default}` expand from the environment inside any string value, and
`MCPGW_<SECTION>__<KEY>[__<KEY>…]` environment variables override single keys (the value
is read as YAML, so `MCPGW_SERVER__PORT=9000` is an int). Every problem is reported as
one `ConfigError` naming the offending key path, e.g. `backends[1].url: required`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from gateway.store.urls import SCHEMES as STORE_SCHEMES
from gateway.store.urls import StoreUrlError, check_store_url

HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
"""An HTTP token (RFC 9110 §5.1)."""
HEADER_BREAK = re.compile(r"[\r\n\0]")

BACKEND_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
NAMESPACE = re.compile(r"^[A-Za-z0-9_.-]{0,32}$")
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
ENV_OVERRIDE_PREFIX = "MCPGW_"
DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config" / "gateway.yaml"


class ConfigError(ValueError):
    """A bad configuration; the message starts with the key path."""


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    path: str = "/mcp"
    max_body_bytes: int = 1_048_576
    allowed_origins: tuple[str, ...] = ()
    shutdown_grace_seconds: float = 20.0
    public_url: str | None = None


@dataclass(frozen=True, slots=True)
class StoreConfig:
    redis_url: str | None = None
    key_prefix: str = "mcpgw:"
    required: bool = False


@dataclass(frozen=True, slots=True)
class JwtConfig:
    algorithms: tuple[str, ...] = ("HS256",)
    secret: str | None = None
    public_key_file: str | None = None
    jwks_url: str | None = None
    issuer: str | None = None
    audience: str | None = None
    leeway_seconds: float = 30.0
    tenant_claim: str = "tenant"
    subject_claim: str = "sub"
    scope_claim: str = "scope"


@dataclass(frozen=True, slots=True)
class ApiKeyConfig:
    sha256: str
    tenant: str
    subject: str
    scopes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceMetadataConfig:
    authorization_servers: tuple[str, ...] = ()
    scopes_supported: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AuthConfig:
    token_sources: tuple[str, ...] = ("header", "query", "params")
    query_param: str = "token"
    jwt: JwtConfig = field(default_factory=JwtConfig)
    api_keys: tuple[ApiKeyConfig, ...] = ()
    resource_metadata: ResourceMetadataConfig = field(default_factory=ResourceMetadataConfig)
    # Tenant given to requests that carry no token; null (the default) means 401.
    anonymous_tenant: str | None = None


@dataclass(frozen=True, slots=True)
class CatalogueConfig:
    separator: str = "__"
    refresh_seconds: float = 60.0
    max_stale_seconds: float = 600.0
    validate_arguments: bool = True
    page_size: int = 100


@dataclass(frozen=True, slots=True)
class CircuitConfig:
    """Circuit breaker of one backend (see gateway.upstream.breaker); 0 turns a trigger off."""

    failures: int = 5
    failure_ratio: float = 0.5
    min_calls: int = 20
    window_seconds: float = 30.0
    cooldown_seconds: float = 10.0


@dataclass(frozen=True, slots=True)
class BackendConfig:
    name: str
    transport: str  # "http" | "stdio"
    namespace: str
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout_seconds: float = 30.0
    max_connections: int = 100
    identity_headers: bool = False
    # Reliability limits (gateway.routing): calls in flight and waiting, reply size,
    # hard cap on a call whose deadline progress keeps extending, retries of unsent requests.
    max_concurrency: int = 100
    max_queue: int = 1000
    max_response_bytes: int = 16 * 1024 * 1024
    max_call_seconds: float | None = None  # None: 10 x timeout_seconds
    retries: int = 2
    circuit: CircuitConfig = field(default_factory=CircuitConfig)

    @property
    def call_cap_seconds(self) -> float:
        """The hard cap on one call, however much progress the backend reports."""
        return self.max_call_seconds if self.max_call_seconds is not None else 10 * self.timeout_seconds


@dataclass(frozen=True, slots=True)
class RateLimitConfig:
    requests_per_second: float
    burst: int


@dataclass(frozen=True, slots=True)
class TenantConfig:
    name: str
    backends: tuple[str, ...] = ("*",)
    tools_allow: tuple[str, ...] = ("*",)
    tools_deny: tuple[str, ...] = ()
    rate_limit: RateLimitConfig | None = None
    backend_headers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AdminConfig:
    scope: str = "mcpgw:admin"


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    port: int | None = None


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    level: str = "info"
    format: str = "auto"  # auto | json | console


@dataclass(frozen=True, slots=True)
class Config:
    server: ServerConfig = field(default_factory=ServerConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    catalogue: CatalogueConfig = field(default_factory=CatalogueConfig)
    backends: tuple[BackendConfig, ...] = ()
    tenants: Mapping[str, TenantConfig] = field(default_factory=dict)
    admin: AdminConfig = field(default_factory=AdminConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)

    def backend(self, name: str) -> BackendConfig | None:
        return next((b for b in self.backends if b.name == name), None)


# ---------------------------------------------------------------- loading


def load_config(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read, expand, override and validate a config file."""
    env = os.environ if environ is None else environ
    file = Path(path) if path else DEFAULT_CONFIG
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(f"{file}: not valid YAML ({detail})") from exc
    return parse_config(raw if raw is not None else {}, env)


def parse_config(raw: Any, environ: Mapping[str, str]) -> Config:
    data = _expand(raw, environ, "")
    data = _apply_overrides(_mapping(data, ""), environ)
    return _build_config(_Section(data, ""))


def _expand(value: Any, env: Mapping[str, str], path: str) -> Any:
    if isinstance(value, str):
        return _expand_string(value, env, path)
    if isinstance(value, dict):
        return {k: _expand(v, env, _join(path, str(k))) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, env, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def _expand_string(text: str, env: Mapping[str, str], path: str) -> str:
    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env and env[name] != "":
            return env[name]
        if default is not None:
            return default
        raise ConfigError(f"{path}: environment variable {name} is not set")

    return ENV_REF.sub(substitute, text)


def _apply_overrides(data: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    for name, text in sorted(env.items()):
        if not name.startswith(ENV_OVERRIDE_PREFIX) or "__" not in name:
            continue
        keys = [k.lower() for k in name[len(ENV_OVERRIDE_PREFIX) :].split("__")]
        node = data
        for key in keys[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        try:
            node[keys[-1]] = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{'.'.join(keys)}: {name} is not valid YAML") from exc
    return data


# ---------------------------------------------------------------- typed reading

T = TypeVar("T")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{path or '<root>'}: must be a mapping")
    return value


class _Section:
    """A mapping being read: typed getters, and unknown keys reported at the end."""

    def __init__(self, data: Any, path: str) -> None:
        self.data = _mapping(data, path)
        self.path = path
        self.seen: set[str] = set()

    def where(self, key: str) -> str:
        return _join(self.path, key)

    def get(self, key: str, kind: type | tuple[type, ...], default: Any) -> Any:
        self.seen.add(key)
        value = self.data.get(key, default)
        if value is None or (isinstance(value, bool) and kind is not bool):
            if value is None:
                return None
            raise ConfigError(f"{self.where(key)}: must be {_kind_name(kind)}")
        if kind is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, kind):
            raise ConfigError(f"{self.where(key)}: must be {_kind_name(kind)}")
        return value

    def required(self, key: str, kind: type) -> Any:
        if self.data.get(key) is None:
            raise ConfigError(f"{self.where(key)}: required")
        return self.get(key, kind, None)

    def number(self, key: str, default: float, *, minimum: float = 0.0) -> float:
        value = self.get(key, float, default)
        if value is None or value < minimum:
            raise ConfigError(f"{self.where(key)}: must be a number >= {minimum:g}")
        return value

    def integer(self, key: str, default: int | None, *, minimum: int = 0) -> int | None:
        value = self.get(key, int, default)
        if value is not None and value < minimum:
            raise ConfigError(f"{self.where(key)}: must be an integer >= {minimum}")
        return value

    def strings(self, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = self.get(key, list, list(default))
        if value is None:
            return ()
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise ConfigError(f"{self.where(key)}[{i}]: must be a string")
        return tuple(value)

    def string_map(self, key: str) -> dict[str, str]:
        value = _mapping(self.get(key, dict, {}), self.where(key))
        out: dict[str, str] = {}
        for k, v in value.items():
            if not isinstance(v, str | int | float) or isinstance(v, bool):
                raise ConfigError(f"{self.where(key)}.{k}: must be a string")
            out[str(k)] = str(v)
        return out

    def header_map(self, key: str) -> dict[str, str]:
        """HTTP headers: names are tokens, and no value may break its line (header injection)."""
        headers = self.string_map(key)
        for name, value in headers.items():
            if not HEADER_NAME.fullmatch(name):
                raise ConfigError(f"{self.where(key)}.{name}: not a valid HTTP header name")
            if HEADER_BREAK.search(value):
                raise ConfigError(f"{self.where(key)}.{name}: line breaks and NUL are not allowed in a header value")
        return headers

    def section(self, key: str) -> _Section:
        self.seen.add(key)
        return _Section(self.data.get(key), self.where(key))

    def items(self, key: str) -> list[_Section]:
        value = self.get(key, list, [])
        return [_Section(item, f"{self.where(key)}[{i}]") for i, item in enumerate(value or [])]

    def done(self) -> None:
        unknown = sorted(set(map(str, self.data)) - self.seen)
        if unknown:
            raise ConfigError(f"{self.where(unknown[0])}: unknown key")


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
             list: "a list", dict: "a mapping"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _read(section: _Section, build: Callable[[_Section], T]) -> T:
    value = build(section)
    section.done()
    return value


# ---------------------------------------------------------------- sections


def _build_config(root: _Section) -> Config:
    config = Config(
        server=_read(root.section("server"), _server),
        store=_read(root.section("store"), _store),
        auth=_read(root.section("auth"), _auth),
        catalogue=_read(root.section("catalogue"), _catalogue),
        backends=_backends(root),
        tenants=_tenants(root),
        admin=_read(root.section("admin"), lambda s: AdminConfig(scope=s.get("scope", str, "mcpgw:admin"))),
        metrics=_read(root.section("metrics"), lambda s: MetricsConfig(port=_port(s, "port", None, minimum=1))),
        logging=_read(root.section("logging"), _logging),
    )
    root.done()
    _check_references(config)
    return config


def _server(s: _Section) -> ServerConfig:
    path = s.get("path", str, "/mcp")
    if not path.startswith("/"):
        raise ConfigError(f"{s.where('path')}: must start with /")
    return ServerConfig(
        host=s.get("host", str, "127.0.0.1"),
        port=_port(s, "port", 8080) or 0,
        path=path,
        max_body_bytes=s.integer("max_body_bytes", 1_048_576, minimum=1024) or 1_048_576,
        allowed_origins=s.strings("allowed_origins", ()),
        shutdown_grace_seconds=s.number("shutdown_grace_seconds", 20.0),
        public_url=s.get("public_url", str, None),
    )


def _port(s: _Section, key: str, default: int | None, *, minimum: int = 0) -> int | None:
    port = s.integer(key, default, minimum=minimum)
    if port is not None and port > 65535:
        raise ConfigError(f"{s.where(key)}: must be a port number (0-65535)")
    return port


def _store(s: _Section) -> StoreConfig:
    url = s.get("redis_url", str, None)
    if url and not url.startswith(STORE_SCHEMES):  # Sentinel and Cluster forms too: gateway.store.urls
        raise ConfigError(f"{s.where('redis_url')}: must be a redis://, rediss:// or unix:// URL")
    try:
        check_store_url(url or "redis://")
    except StoreUrlError as exc:
        raise ConfigError(f"{s.where('redis_url')}: {exc}") from exc
    return StoreConfig(
        redis_url=url or None,
        key_prefix=s.get("key_prefix", str, "mcpgw:"),
        required=s.get("required", bool, False),
    )


TOKEN_SOURCES = ("header", "query", "params")


def _auth(s: _Section) -> AuthConfig:
    sources = s.strings("token_sources", TOKEN_SOURCES)
    for i, source in enumerate(sources):
        if source not in TOKEN_SOURCES:
            raise ConfigError(f"{s.where('token_sources')}[{i}]: must be one of {', '.join(TOKEN_SOURCES)}")
    return AuthConfig(
        token_sources=sources,
        query_param=s.get("query_param", str, "token"),
        jwt=_read(s.section("jwt"), _jwt),
        api_keys=tuple(_read(item, _api_key) for item in s.items("api_keys")),
        resource_metadata=_read(s.section("resource_metadata"), _resource_metadata),
        anonymous_tenant=s.get("anonymous_tenant", str, None),
    )


JWT_ALGORITHMS = ("HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "PS256", "PS384",
                  "PS512", "ES256", "ES384", "ES512", "EdDSA")


def _jwt(s: _Section) -> JwtConfig:
    algorithms = s.strings("algorithms", ("HS256",))
    for i, alg in enumerate(algorithms):
        if alg not in JWT_ALGORITHMS:
            raise ConfigError(f"{s.where('algorithms')}[{i}]: unsupported algorithm {alg!r}")
    hmac = any(a.startswith("HS") for a in algorithms)
    asymmetric = any(not a.startswith("HS") for a in algorithms)
    if hmac and asymmetric:
        # Mixing lets a public key double as an HMAC secret (algorithm confusion).
        raise ConfigError(f"{s.where('algorithms')}: do not mix HS* with asymmetric algorithms")
    jwt = JwtConfig(
        algorithms=algorithms,
        secret=s.get("secret", str, None) or None,
        public_key_file=s.get("public_key_file", str, None),
        jwks_url=s.get("jwks_url", str, None),
        issuer=s.get("issuer", str, None),
        audience=s.get("audience", str, None),
        leeway_seconds=s.number("leeway_seconds", 30.0),
        tenant_claim=s.get("tenant_claim", str, "tenant"),
        subject_claim=s.get("subject_claim", str, "sub"),
        scope_claim=s.get("scope_claim", str, "scope"),
    )
    if asymmetric and not (jwt.public_key_file or jwt.jwks_url):
        raise ConfigError(f"{s.where('public_key_file')}: required (or jwks_url) for {algorithms[0]}")
    if jwt.secret is not None and len(jwt.secret.encode()) < 32:
        raise ConfigError(f"{s.where('secret')}: must be at least 32 bytes")
    return jwt


def _api_key(s: _Section) -> ApiKeyConfig:
    digest = s.required("sha256", str).lower()
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise ConfigError(f"{s.where('sha256')}: must be 64 hex digits")
    return ApiKeyConfig(
        sha256=digest,
        tenant=s.required("tenant", str),
        subject=s.required("subject", str),
        scopes=s.strings("scopes", ()),
    )


def _resource_metadata(s: _Section) -> ResourceMetadataConfig:
    return ResourceMetadataConfig(
        authorization_servers=s.strings("authorization_servers", ()),
        scopes_supported=s.strings("scopes_supported", ()),
    )


def _catalogue(s: _Section) -> CatalogueConfig:
    separator = s.get("separator", str, "__")
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,4}", separator):
        raise ConfigError(f"{s.where('separator')}: must be 1-4 of A-Z a-z 0-9 _ . -")
    return CatalogueConfig(
        separator=separator,
        refresh_seconds=s.number("refresh_seconds", 60.0, minimum=0.05),
        max_stale_seconds=s.number("max_stale_seconds", 600.0),
        validate_arguments=s.get("validate_arguments", bool, True),
        page_size=s.integer("page_size", 100, minimum=1) or 100,
    )


def _backends(root: _Section) -> tuple[BackendConfig, ...]:
    backends = tuple(_read(item, _backend) for item in root.items("backends"))
    seen: set[str] = set()
    for i, backend in enumerate(backends):
        if backend.name in seen:
            raise ConfigError(f"backends[{i}].name: duplicate backend {backend.name!r}")
        seen.add(backend.name)
    return backends


def _backend(s: _Section) -> BackendConfig:
    name = s.required("name", str)
    if not BACKEND_NAME.fullmatch(name):
        raise ConfigError(f"{s.where('name')}: must match {BACKEND_NAME.pattern}")
    transport = s.required("transport", str)
    namespace = s.get("namespace", str, name)
    if not NAMESPACE.fullmatch(namespace):
        raise ConfigError(f"{s.where('namespace')}: must match {NAMESPACE.pattern}")
    backend = BackendConfig(
        name=name,
        transport=transport,
        namespace=namespace,
        url=s.get("url", str, None),
        headers=s.header_map("headers"),
        command=s.strings("command", ()),
        env=s.string_map("env"),
        cwd=s.get("cwd", str, None),
        timeout_seconds=s.number("timeout_seconds", 30.0, minimum=0.001),
        max_connections=s.integer("max_connections", 100, minimum=1) or 100,
        identity_headers=s.get("identity_headers", bool, False),
        **_backend_limits(s),
    )
    if transport == "http" and not (backend.url or "").startswith(("http://", "https://")):
        raise ConfigError(f"{s.where('url')}: required, an http:// or https:// URL")
    if transport == "stdio" and not backend.command:
        raise ConfigError(f"{s.where('command')}: required for transport stdio")
    if transport not in ("http", "stdio"):
        raise ConfigError(f"{s.where('transport')}: must be http or stdio")
    return backend


def _backend_limits(s: _Section) -> dict[str, Any]:
    timeout = s.number("timeout_seconds", 30.0, minimum=0.001)
    cap = s.get("max_call_seconds", float, None)
    if cap is not None and cap < timeout:
        raise ConfigError(f"{s.where('max_call_seconds')}: must be a number >= timeout_seconds ({timeout:g})")
    return {
        "max_concurrency": s.integer("max_concurrency", 100, minimum=1) or 100,
        "max_queue": s.integer("max_queue", 1000, minimum=0) or 0,
        "max_response_bytes": s.integer("max_response_bytes", 16 * 1024 * 1024, minimum=1024) or 1024,
        "max_call_seconds": cap,
        "retries": min(s.integer("retries", 2, minimum=0) or 0, 5),
        "circuit": _read(s.section("circuit"), _circuit),
    }


def _circuit(s: _Section) -> CircuitConfig:
    ratio = s.number("failure_ratio", 0.5)
    if ratio > 1:
        raise ConfigError(f"{s.where('failure_ratio')}: must be a number between 0 and 1")
    return CircuitConfig(
        failures=s.integer("failures", 5, minimum=0) or 0,
        failure_ratio=ratio,
        min_calls=s.integer("min_calls", 20, minimum=1) or 1,
        window_seconds=s.number("window_seconds", 30.0, minimum=0.01),
        cooldown_seconds=s.number("cooldown_seconds", 10.0, minimum=0.01),
    )


def _tenants(root: _Section) -> dict[str, TenantConfig]:
    raw = _mapping(root.get("tenants", dict, {}), "tenants")
    return {str(name): _read(_Section(body, f"tenants.{name}"), _tenant(str(name))) for name, body in raw.items()}


def _tenant(name: str) -> Callable[[_Section], TenantConfig]:
    def build(s: _Section) -> TenantConfig:
        tools = s.section("tools")
        allow, deny = tools.strings("allow", ("*",)), tools.strings("deny", ())
        tools.done()
        headers = _mapping(s.get("backend_headers", dict, {}), s.where("backend_headers"))
        return TenantConfig(
            name=name,
            backends=s.strings("backends", ("*",)),
            tools_allow=allow,
            tools_deny=deny,
            rate_limit=_rate_limit(s.section("rate_limit")),
            backend_headers={
                str(b): _Section({str(b): h}, s.where("backend_headers")).header_map(str(b))
                for b, h in headers.items()
            },
        )

    return build


def _rate_limit(s: _Section) -> RateLimitConfig | None:
    if not s.data:
        return None
    limit = RateLimitConfig(
        requests_per_second=s.number("requests_per_second", 0.0, minimum=0.001),
        burst=s.integer("burst", 1, minimum=1) or 1,
    )
    s.done()
    return limit


def _logging(s: _Section) -> LoggingConfig:
    level = s.get("level", str, "info").lower()
    fmt = s.get("format", str, "auto")
    if level not in ("debug", "info", "warning", "error"):
        raise ConfigError(f"{s.where('level')}: must be debug, info, warning or error")
    if fmt not in ("auto", "json", "console"):
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
