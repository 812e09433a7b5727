"""Configuration: YAML in, frozen typed objects out, parsed once at start.

`${VAR}` and `${VAR:-default}` expand from the environment inside any string value, and
`MCPGW_<SECTION>__<KEY>[__<KEY>…]` environment variables override single keys (the value
is read as YAML, so `MCPGW_SERVER__PORT=9000` is an int). Every problem is reported as
one `ConfigError` naming the offending key path, e.g. `backends[1].url: required`.

    model.py        the frozen types, and every default (written once, there)
    loading.py      file -> environment -> sections
    environment.py  ${VAR} expansion
    overrides.py    MCPGW_ overrides: names keep their case, never a new tenant or backend
    reader.py       typed reading of one mapping, errors with key paths
    sections.py     one builder per section, and the checks across sections
    backend_http.py what an HTTP backend's URL and TLS files must be, and which clients exist
    redis_urls.py   the store.redis_url forms (pure; the store's client parses with it too)
    tracing.py      the tracing section (OpenTelemetry export, sampling, what spans may carry)
    auth.py         the auth section: token sources, JWTs, API keys, metadata, required scopes
    outbound.py     backends' OAuth (`auth`, tenants' `backend_auth`) and the `oauth` section
    audit.py        the audit section (its model: audit_model.py): sinks, queue policy, the chain's key
"""

from gateway.config.audit_model import AuditConfig
from gateway.config.loading import DEFAULT_CONFIG, load_config, parse_config
from gateway.config.model import (
    AUTH_MODES,
    AdminConfig,
    ApiKeyConfig,
    AuthConfig,
    Backend,
    BackendAuth,
    BackendConfig,
    CatalogueConfig,
    CircuitConfig,
    Config,
    HttpBackend,
    JwtConfig,
    LoggingConfig,
    MetricsConfig,
    MrtrConfig,
    OAuthConfig,
    RateLimitConfig,
    ResourceMetadataConfig,
    SearchConfig,
    ServerConfig,
    StdioBackend,
    StoreConfig,
    TenantConfig,
    TenantLimits,
    TlsConfig,
    TracingConfig,
    UpstreamConfig,
)
from gateway.config.reader import ConfigError

__all__ = [
    "AUTH_MODES", "DEFAULT_CONFIG", "AdminConfig", "ApiKeyConfig", "AuditConfig", "AuthConfig", "Backend",
    "BackendAuth", "BackendConfig", "CatalogueConfig", "CircuitConfig", "Config", "ConfigError", "HttpBackend",
    "JwtConfig",
    "LoggingConfig", "MetricsConfig", "MrtrConfig", "OAuthConfig", "RateLimitConfig", "ResourceMetadataConfig",
    "SearchConfig", "ServerConfig", "StdioBackend", "StoreConfig", "TenantConfig", "TenantLimits", "TlsConfig",
    "TracingConfig", "UpstreamConfig", "load_config", "parse_config",
]
