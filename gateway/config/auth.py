"""The `auth` section: token sources, JWTs, API keys, RFC 9728 metadata and the scopes calls need."""

from __future__ import annotations

import re

from gateway.config.backend_http import check_jwks_url
from gateway.config.model import ApiKeyConfig, AuthConfig, JwtConfig, ResourceMetadataConfig
from gateway.config.reader import ConfigError, Section, mapping, read

TOKEN_SOURCES = ("header", "query", "params")
JWT_ALGORITHMS = ("HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "PS256", "PS384",
                  "PS512", "ES256", "ES384", "ES512", "EdDSA")
SCOPE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
"""One OAuth scope token (RFC 6749 §3.3): it goes into WWW-Authenticate's quoted `scope`."""


def auth_section(s: Section) -> AuthConfig:
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
        required_scopes=scopes(s, "required_scopes"),
        tool_scopes=_tool_scopes(s),
    )


def scopes(s: Section, key: str) -> tuple[str, ...]:
    """A list of OAuth scope tokens."""
    values = s.strings(key)
    for i, value in enumerate(values):
        if not SCOPE.fullmatch(value):
            raise ConfigError(f"{s.where(key)}[{i}]: not an OAuth scope (no spaces, quotes or backslashes)")
    return values


def _tool_scopes(s: Section) -> dict[str, tuple[str, ...]]:
    """Globs on exposed tool names, each with the scopes a tools/call of a matching tool needs."""
    s.seen.add("tool_scopes")
    globs = mapping(s.data.get("tool_scopes"), s.where("tool_scopes"))
    section = Section(globs, s.where("tool_scopes"))
    return {str(glob): scopes(section, glob) for glob in globs}


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
        groups_claim=s.get("groups_claim", str),
        max_lifetime_seconds=s.number("max_lifetime_seconds", minimum=1.0),
        require_typ=_nullable_string(s, "require_typ"),
        query_tokens=s.get("query_tokens", bool),
    )
    if jwt.jwks_url is not None:
        s.check("jwks_url", check_jwks_url, jwt.jwks_url)
    if jwt.oauth and not (jwt.public_key_file or jwt.jwks_url):
        raise ConfigError(f"{s.where('public_key_file')}: required (or jwks_url) for {algorithms[0]}")
    if jwt.secret is not None and len(jwt.secret.encode()) < 32:
        raise ConfigError(f"{s.where('secret')}: must be at least 32 bytes")
    return jwt


def _nullable_string(s: Section, key: str) -> str | None:
    """A string whose default is not null, but which null (or "") turns off."""
    if key in s.data and s.data[key] in (None, ""):
        s.seen.add(key)
        return None
    return str(s.get(key, str))


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
                        scopes=s.strings("scopes"), groups=s.strings("groups"))


def _resource_metadata(s: Section) -> ResourceMetadataConfig:
    return ResourceMetadataConfig(authorization_servers=s.strings("authorization_servers"),
                                  scopes_supported=scopes(s, "scopes_supported"))
