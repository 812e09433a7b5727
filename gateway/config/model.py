"""The configuration as frozen objects. Every default is written here, once (the parser takes a missing
key's value from these fields)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar

from gateway.config.audit_model import AuditConfig
from gateway.config.integrity import BackendIntegrity, IntegrityConfig
from gateway.config.server_model import VirtualServer
from gateway.policy import ALLOW, Rule, TenantPolicy


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
    # Connection hardening (gateway.transport.http.connections): every phase of a client connection
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
    groups_claim: str = "groups"  # the caller's groups or roles: a list, or one space-separated string
    max_lifetime_seconds: float = 86_400.0  # a token whose exp lies further ahead is refused (401)
    # OAuth access tokens (verified with an authorization server's keys: jwks_url or public_key_file).
    # `audience` null means the gateway's own resource URL (server.public_url's origin + server.path).
    require_typ: str | None = "at+jwt"  # their JOSE `typ` (RFC 9068), which ID tokens lack; null: not checked
    query_tokens: bool = False  # taken from ?token= too (the MCP spec forbids access tokens in URIs)

    @property
    def oauth(self) -> bool:
        """Whether tokens come from an authorization server (its public keys), not the gateway's own HS secret."""
        return any(not algorithm.startswith("HS") for algorithm in self.algorithms)


@dataclass(frozen=True, slots=True)
class ApiKeyConfig:
    sha256: str
    tenant: str
    subject: str
    scopes: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()  # what policy rules' `callers.groups` match for this key


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
    # Scopes a call needs (403 insufficient_scope, so clients step up): every MCP request, and the
    # tools/call of tools matching a glob. Tenants and backends have `required_scopes` of their own.
    required_scopes: tuple[str, ...] = ()
    tool_scopes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """`find_tools` of tenants in search mode (gateway.catalogue.search)."""

    results: int = 5  # tools found when the caller gives no limit
    max_results: int = 20  # the most a caller may ask for
    max_bytes: int = 32_768  # a result's tool definitions stop before this size (the first is always given)


@dataclass(frozen=True, slots=True)
class CatalogueConfig:
    separator: str = "__"
    refresh_seconds: float = 60.0
    max_stale_seconds: float = 600.0
    validate_arguments: bool = True
    page_size: int = 100
    search: SearchConfig = field(default_factory=SearchConfig)


DISCOVERY_MODES = ("full", "search")
"""A tenant's `discovery`: tools/list gives every tool, or the gateway's search tools (and `always_listed`)."""


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
    protocol: str = "auto"  # the backend's MCP era, one of BACKEND_PROTOCOLS (gateway.upstream.http.eras)
    required_scopes: tuple[str, ...] = ()  # a call that reaches this backend needs them (403 insufficient_scope)
    integrity: BackendIntegrity = field(default_factory=BackendIntegrity)  # pinning (gateway.catalogue.integrity)

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


AUTH_MODES = ("client_credentials", "token_exchange", "user_oauth", "none")
"""A backend's `auth.mode` (gateway.oauth): the gateway's own client, the caller's token exchanged (RFC 8693),
each user's own grant; `none` (a tenant's override): the static headers only."""
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"


@dataclass(frozen=True, slots=True)
class BackendAuth:
    """How the gateway gets a backend's bearer token (see gateway.oauth); static `headers` stay the default."""

    mode: str  # one of AUTH_MODES
    issuer: str | None = None  # the authorization server: its RFC 8414/OIDC metadata names the endpoints ...
    token_url: str | None = None  # ... or give them here
    authorization_url: str | None = None  # user_oauth
    revocation_url: str | None = None  # a user's refresh token is revoked there when the connection is deleted
    client_id: str = ""
    client_secret: str | None = None  # null: a public client (user_oauth with PKCE alone)
    client_auth: str = "client_secret_basic"  # or client_secret_post
    scopes: tuple[str, ...] = ()
    resource: str | None = None  # RFC 8707 resource asked for; null: the backend's URL; "": none (Entra ID v2)
    audience: str | None = None  # `audience` asked for too (RFC 8693; Auth0, Okta), beside or instead of `resource`
    subject_token_type: str = ACCESS_TOKEN_TYPE  # what the caller's token is, to the exchange
    actor: bool = False  # token_exchange: the gateway's own client-credentials token goes along as actor_token
    catalogue: str | None = None  # tools/list without a user: client_credentials | headers; null: by mode

    @property
    def catalogue_auth(self) -> str:
        """How lists are fetched: with the gateway's own token, except where it has none (user_oauth)."""
        return self.catalogue or ("headers" if self.mode in ("user_oauth", "none") else "client_credentials")


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
    auth: BackendAuth | None = None  # its bearer token from OAuth (gateway.oauth); null: `headers` only


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
    # Bytes of replies its clients have not read yet; beyond: 429. None: sized for the machine
    # (gateway.transport.held.default_budget).
    buffered_bytes: int | None = None


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
    rules: tuple[Rule, ...] = ()  # this tenant's policy rules, after the gateway-wide ones (gateway.policy)
    default: str = ALLOW  # what a caller is given when no rule decides: allow | deny
    policy: TenantPolicy = field(default_factory=TenantPolicy)  # compiled: gateway-wide rules, then `rules`
    discovery: str = "full"  # one of DISCOVERY_MODES
    always_listed: tuple[str, ...] = ()  # globs on exposed tool names listed in search mode too
    required_scopes: tuple[str, ...] = ()  # every MCP request of the tenant needs them (403 insufficient_scope)
    backend_auth: Mapping[str, BackendAuth] = field(default_factory=dict)  # a backend's `auth`, for this tenant


@dataclass(frozen=True, slots=True)
class AdminConfig:
    scope: str = "mcpgw:admin"
    refresh_interval_seconds: float = 10.0  # POST /admin/catalogue/refresh at most this often (429)
    status_page: bool = True  # GET /admin/: the live status page (its JSON endpoints are served either way)


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
class ConfirmUser:
    """The gateway's own client at its users' authorization server: whoever opens a user_oauth link signs in
    there first and must be the user the link was made for (MCP 2025-11-25 elicitation, §Phishing)."""

    client_id: str
    client_secret: str | None = None  # null: a public client (PKCE alone)
    issuer: str | None = None  # null: the first of auth.resource_metadata.authorization_servers
    scopes: tuple[str, ...] = ()  # asked for at that sign-in; empty: auth.resource_metadata.scopes_supported
    resource: str | None = None  # the RFC 8707 resource asked for; null: the gateway's own URL; "": none


@dataclass(frozen=True, slots=True)
class OAuthConfig:
    """The gateway as an OAuth client of its backends' authorization servers (gateway.oauth)."""

    keys: tuple[str, ...] = ()  # AES-256-GCM keys (base64 of 32 bytes) sealing stored tokens: the first seals, all open
    link_seconds: float = 600.0  # an authorization link, and the sign-in it starts, stay valid this long
    wait_seconds: float = 120.0  # a call waits this long for its user to authorize (URL elicitation), then fails
    refresh_margin_seconds: float = 30.0  # a token is renewed this long before it expires
    timeout_seconds: float = 10.0  # one request to an authorization server
    confirm_user: ConfirmUser | None = None  # null: a link is good for whoever opens it first (keep it private)


@dataclass(frozen=True, slots=True)
class MrtrConfig:
    """Multi-round trips (gateway.transport.rounds): a 2026 client answering a handshake-era backend's questions."""

    round_seconds: float = 60.0  # a parked call whose client does not retry this long is cancelled at its backend
    max_rounds: int = 10  # InputRequiredResults per call; after them the backend's next question is refused
    secret: str | None = None  # the requestState HMAC key; None: one shared through Redis, else one per process


TRACE_SAMPLERS = ("always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off",
                  "parentbased_traceidratio")
"""The OpenTelemetry SDK's standard samplers (OTEL_TRACES_SAMPLER's values)."""
TRACE_PROTOCOLS = ("http/protobuf", "grpc")
"""How spans reach the collector: OTLP over HTTP (protobuf bodies) or over gRPC."""


@dataclass(frozen=True, slots=True)
class TracingConfig:
    """OpenTelemetry traces (gateway.tracing, the `otel` extra); a null key: its OTEL_* variable, else the default."""

    enabled: bool = False
    protocol: str | None = None  # TRACE_PROTOCOLS; null: OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL, else http/protobuf
    endpoint: str | None = None  # the collector (OTEL_EXPORTER_OTLP_ENDPOINT's form; http/protobuf adds /v1/traces)
    headers: Mapping[str, str] = field(default_factory=dict)  # on every export; empty: OTEL_EXPORTER_OTLP_HEADERS
    timeout_seconds: float | None = None  # one export; null: OTEL_EXPORTER_OTLP_TIMEOUT, else 10
    sampler: str | None = None  # one of TRACE_SAMPLERS; null: OTEL_TRACES_SAMPLER, else parentbased_always_on
    ratio: float | None = None  # traceidratio's; null: OTEL_TRACES_SAMPLER_ARG, else 1.0
    service_name: str | None = None  # null: OTEL_SERVICE_NAME, else mcp-gateway
    resource_attributes: Mapping[str, str] = field(default_factory=dict)  # over OTEL_RESOURCE_ATTRIBUTES
    max_queue_size: int = 2048  # ended spans waiting for export; beyond: dropped and counted
    capture_arguments: bool = False  # gen_ai.tool.call.arguments and prompt variables (opt-in: they may be secret)
    capture_results: bool = False  # gen_ai.tool.call.result
    record_subject: bool = False  # the caller's subject as mcpgw.subject (often a person's id)


@dataclass(frozen=True, slots=True)
class Config:
    server: ServerConfig = field(default_factory=ServerConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    catalogue: CatalogueConfig = field(default_factory=CatalogueConfig)
    backends: tuple[Backend, ...] = ()
    upstream: UpstreamConfig = field(default_factory=UpstreamConfig)
    tenants: Mapping[str, TenantConfig] = field(default_factory=dict)
    rules: tuple[Rule, ...] = ()  # gateway-wide policy rules, checked before each tenant's own
    limits: TenantLimits = field(default_factory=TenantLimits)
    admin: AdminConfig = field(default_factory=AdminConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    mrtr: MrtrConfig = field(default_factory=MrtrConfig)
    tracing: TracingConfig = field(default_factory=TracingConfig)
    oauth: OAuthConfig = field(default_factory=OAuthConfig)
    integrity: IntegrityConfig = field(default_factory=IntegrityConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    servers: Mapping[str, VirtualServer] = field(default_factory=dict)  # virtual servers (config.server_model)

    def backend(self, name: str) -> Backend | None:
        return next((b for b in self.backends if b.name == name), None)

    def backend_auth(self, backend: str, tenant: str | None) -> BackendAuth | None:
        """A backend's OAuth, as a tenant's override (`mode: none`: none) or else the backend's own says."""
        override = self.tenants[tenant].backend_auth.get(backend) if tenant in self.tenants else None
        found = self.backend(backend)
        chosen = override or (found.auth if isinstance(found, HttpBackend) else None)
        return chosen if chosen is not None and chosen.mode != "none" else None


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
