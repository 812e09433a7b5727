"""The configuration as frozen objects. Every default is written here, once: the parser
(gateway.config.sections) takes a missing key's value from these fields."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    path: str = "/mcp"
    max_body_bytes: int = 1_048_576
    allowed_origins: tuple[str, ...] = ()
    shutdown_grace_seconds: float = 20.0
    public_url: str | None = None
    ready_requires: str = "any_backend"  # any_backend | none: whether /readyz needs a backend serving
    # Connection hardening (gateway.transport.connections): every phase of a client connection
    # is bounded, so slow or silent clients cannot hold descriptors or memory.
    headers_timeout_seconds: float = 10.0  # first byte of a request to the end of its headers
    body_timeout_seconds: float = 30.0  # reading one request's body
    idle_timeout_seconds: float = 75.0  # a keep-alive connection with no request
    write_timeout_seconds: float = 30.0  # a reply or stream the client does not read
    max_connections: int = 10_000  # per process; more are refused with 503
    session_idle_seconds: float = 3600.0  # a session unused this long ends


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
    jwks_cache_seconds: float = 300.0  # fetched keys are trusted this long (a removed key stops working)
    tenant_claim: str = "tenant"
    subject_claim: str = "sub"
    scope_claim: str = "scope"
    max_lifetime_seconds: float = 86_400.0  # a token whose exp lies further ahead is refused (401)


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
    max_token_bytes: int = 8192  # longer tokens are refused (401) before any verification


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


BACKEND_PROTOCOLS = ("auto", "2026", "handshake")
"""A backend's `protocol`: found out (handshake first, then server/discover), or pinned to one era."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendConfig:
    """What every backend has, whichever transport reaches it (see HttpBackend, StdioBackend)."""

    transport: ClassVar[str]
    name: str
    namespace: str
    timeout_seconds: float = 30.0
    # Reliability limits (gateway.upstream.policy): calls in flight and waiting, reply size,
    # hard cap on a call whose deadline progress keeps extending, retries of unsent requests.
    max_concurrency: int = 100
    max_queue: int = 1000
    max_response_bytes: int = 16 * 1024 * 1024
    max_call_seconds: float | None = None  # None: 10 x timeout_seconds
    retries: int = 2
    circuit: CircuitConfig = field(default_factory=CircuitConfig)
    protocol: str = "auto"  # the backend's MCP era, one of BACKEND_PROTOCOLS (gateway.upstream.http_eras)

    @property
    def call_cap_seconds(self) -> float:
        """The hard cap on one call, however much progress the backend reports."""
        return self.max_call_seconds if self.max_call_seconds is not None else 10 * self.timeout_seconds


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """Per-backend TLS: a CA bundle to trust instead of the system's, and a client certificate (mTLS)."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None  # None: the key is in cert_file


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpBackend(BackendConfig):
    """A backend reached over Streamable HTTP."""

    transport: ClassVar[str] = "http"
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    max_connections: int = 100
    identity_headers: bool = False  # send X-MCP-Tenant and X-MCP-Subject
    # Connections (gateway.config.backend_http): TLS files, proxies from the environment, keep-alive idle limit.
    tls: TlsConfig | None = None
    proxy_from_env: bool = False
    idle_seconds: float = 4.0


@dataclass(frozen=True, slots=True, kw_only=True)
class StdioBackend(BackendConfig):
    """A backend run as a child process speaking MCP over stdin/stdout."""

    transport: ClassVar[str] = "stdio"
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None


Backend = HttpBackend | StdioBackend


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    http_client: str = "builtin"  # which client talks to HTTP backends (gateway.config.backend_http.HTTP_CLIENTS)


@dataclass(frozen=True, slots=True)
class RateLimitConfig:
    requests_per_second: float
    burst: int = 1


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """Per-tenant budgets, so one tenant cannot exhaust what the others need (top-level `limits`
    gives every tenant's defaults; `tenants.<name>.limits` overrides them key by key)."""

    sessions: int = 10_000  # a new one beyond this ends the tenant's least recently used session
    streams: int = 1_000  # open GET streams; beyond: 429
    in_flight: int = 1_000  # requests being answered at once; beyond: 429 (a batch member: -32603 "limit")
    batch_size: int = 100  # members of one 2025-03-26 batch; beyond: 429


@dataclass(frozen=True, slots=True)
class TenantConfig:
    name: str
    backends: tuple[str, ...] = ()  # no default access: a tenant sees only the backends it lists
    tools_allow: tuple[str, ...] = ("*",)
    tools_deny: tuple[str, ...] = ()
    prompts_allow: tuple[str, ...] = ("*",)  # globs on namespaced prompt names
    prompts_deny: tuple[str, ...] = ()
    resources_allow: tuple[str, ...] = ("*",)  # globs on gateway URIs and URI templates
    resources_deny: tuple[str, ...] = ()
    rate_limit: RateLimitConfig | None = None
    backend_headers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    limits: TenantLimits = field(default_factory=TenantLimits)


@dataclass(frozen=True, slots=True)
class AdminConfig:
    scope: str = "mcpgw:admin"
    refresh_interval_seconds: float = 10.0  # POST /admin/catalogue/refresh at most this often (429)


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """/metrics names every tenant, backend and tool: it is served on `port` only, or on the main
    port to scrapes that present `token` (Authorization: Bearer); with neither, not at all."""

    port: int | None = None
    token: str | None = None


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    level: str = "info"
    format: str = "auto"  # auto | json | console


@dataclass(frozen=True, slots=True)
class MrtrConfig:
    """Multi-round trips (gateway.transport.rounds): a 2026 client answering a handshake-era backend's questions."""

    round_seconds: float = 60.0  # a parked call whose client does not retry this long is cancelled at its backend
    max_rounds: int = 10  # InputRequiredResults per call; after them the backend's next question is refused
    secret: str | None = None  # the requestState HMAC key; None: one shared through Redis, else one per process


@dataclass(frozen=True, slots=True)
class Config:
    server: ServerConfig = field(default_factory=ServerConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    catalogue: CatalogueConfig = field(default_factory=CatalogueConfig)
    backends: tuple[Backend, ...] = ()
    upstream: UpstreamConfig = field(default_factory=UpstreamConfig)
    tenants: Mapping[str, TenantConfig] = field(default_factory=dict)
    limits: TenantLimits = field(default_factory=TenantLimits)
    admin: AdminConfig = field(default_factory=AdminConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    mrtr: MrtrConfig = field(default_factory=MrtrConfig)

    def backend(self, name: str) -> Backend | None:
        return next((b for b in self.backends if b.name == name), None)


def default_of(model: type, name: str) -> Any:
    """The default of field `name` of dataclass `model`; None for a field without one (a required key)."""
    found = next((f for f in fields(model) if f.name == name), None)
    if found is None:
        raise KeyError(f"{model.__name__} has no field {name!r}")
    if found.default is not MISSING:
        return found.default
    if found.default_factory is not MISSING:
        return found.default_factory()
    return None
