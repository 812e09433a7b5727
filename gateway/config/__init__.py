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
"""

from gateway.config.loading import DEFAULT_CONFIG, load_config, parse_config
from gateway.config.model import (
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
    RateLimitConfig,
    ResourceMetadataConfig,
    ServerConfig,
    StdioBackend,
    StoreConfig,
    TenantConfig,
    TenantLimits,
    TlsConfig,
    UpstreamConfig,
)
from gateway.config.reader import ConfigError

__all__ = [
    "DEFAULT_CONFIG", "AdminConfig", "ApiKeyConfig", "AuthConfig", "Backend", "BackendConfig", "CatalogueConfig",
    "CircuitConfig", "Config", "ConfigError", "HttpBackend", "JwtConfig", "LoggingConfig", "MetricsConfig",
    "MrtrConfig", "RateLimitConfig", "ResourceMetadataConfig", "ServerConfig", "StdioBackend", "StoreConfig",
    "TenantConfig", "TenantLimits", "TlsConfig", "UpstreamConfig", "load_config", "parse_config",
]
