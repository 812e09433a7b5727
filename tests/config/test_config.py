"""gateway.config: YAML in, frozen objects out, every error prefixed with its key path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.config import (
    DEFAULT_CONFIG,
    ApiKeyConfig,
    Config,
    ConfigError,
    HttpBackend,
    RateLimitConfig,
    ServerConfig,
    StdioBackend,
    TenantConfig,
    load_config,
    parse_config,
)

SHIPPED = Path(__file__).resolve().parents[2] / "gateway" / "default_config.yaml"
SECRET = "s" * 32


def stdio(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "transport": "stdio", "command": ["python", "-m", name], **extra}


def http(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "transport": "http", "url": f"http://{name}:8000/mcp", **extra}


def error_of(raw: Any, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, environ or {})
    return str(info.value)


# ---------------------------------------------------------------- the shipped file


def test_shipped_config_loads_with_an_empty_environment() -> None:
    config = load_config(SHIPPED, {})
    assert [b.name for b in config.backends] == ["clock", "calc", "notes"]
    assert config.backends[0] == StdioBackend(
        name="clock", namespace="clock", command=("python", "-m", "gateway.demo.clock"),
        timeout_seconds=10.0,
    )
    assert config.auth.jwt.secret == "dev-only-insecure-secret-change-me-0123456789"
    assert config.tenants["globex"] == TenantConfig(
        name="globex", backends=("clock", "calc"), tools_deny=("calc__slow",), prompts_allow=("clock__*",),
        resources_deny=("calc+calc://squares/*",), rate_limit=RateLimitConfig(requests_per_second=10.0, burst=20),
    )
    assert [(k.tenant, k.subject, k.scopes) for k in config.auth.api_keys] == [
        ("acme", "demo", ("mcpgw:admin",)), ("globex", "demo", ()),
    ]
    assert config.store.redis_url is None


def test_shipped_config_is_the_default_path() -> None:
    assert DEFAULT_CONFIG == SHIPPED
    assert load_config(None, {}) == load_config(SHIPPED, {})


def test_shipped_config_takes_the_jwt_secret_from_the_environment() -> None:
    config = load_config(SHIPPED, {"MCPGW_JWT_SECRET": "x" * 40})
    assert config.auth.jwt.secret == "x" * 40


# ---------------------------------------------------------------- defaults and files


def test_an_empty_mapping_gives_the_documented_defaults() -> None:
    config = parse_config({}, {})
    assert config == Config()
    assert config.server == ServerConfig(host="127.0.0.1", port=8080, path="/mcp", max_body_bytes=1_048_576)
    assert config.auth.token_sources == ("header", "query", "params")
    assert config.catalogue.separator == "__"


def test_an_empty_file_gives_the_defaults(tmp_path: Path) -> None:
    file = tmp_path / "empty.yaml"
    file.write_text("")
    assert load_config(file, {}) == Config()


def test_a_missing_file_is_reported_with_its_path(tmp_path: Path) -> None:
    file = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(file, {})
    assert str(info.value) == f"{file}: cannot read (No such file or directory)"


def test_invalid_yaml_is_reported_with_the_file_path(tmp_path: Path) -> None:
    file = tmp_path / "bad.yaml"
    file.write_text("server: {port: 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(file, {})
    assert str(info.value).startswith(f"{file}: not valid YAML (")


def test_invalid_yaml_is_reported_in_one_line(tmp_path: Path) -> None:
    file = tmp_path / "bad.yaml"
    file.write_text("server: {port: 1\nstore: [\n")
    with pytest.raises(ConfigError) as info:
        load_config(file, {})
    assert "\n" not in str(info.value)


def test_the_root_must_be_a_mapping() -> None:
    assert error_of([1, 2]) == "<root>: must be a mapping"


def test_the_file_is_read_from_disk_and_expanded(tmp_path: Path) -> None:
    file = tmp_path / "gw.yaml"
    file.write_text("server:\n  host: ${HOST}\n  port: 9100\n")
    assert load_config(file, {"HOST": "0.0.0.0"}).server == ServerConfig(host="0.0.0.0", port=9100)


# ---------------------------------------------------------------- ${VAR} expansion


def test_a_variable_expands_inside_a_string() -> None:
    raw = {"backends": [http("search", headers={"Authorization": "Bearer ${SEARCH_TOKEN}"})]}
    config = parse_config(raw, {"SEARCH_TOKEN": "abc"})
    assert config.backends[0].headers == {"Authorization": "Bearer abc"}


def test_a_default_is_used_when_the_variable_is_unset() -> None:
    assert parse_config({"server": {"host": "${HOST:-0.0.0.0}"}}, {}).server.host == "0.0.0.0"


def test_a_default_is_used_when_the_variable_is_empty() -> None:
    assert parse_config({"server": {"host": "${HOST:-0.0.0.0}"}}, {"HOST": ""}).server.host == "0.0.0.0"


def test_a_set_variable_wins_over_its_default() -> None:
    assert parse_config({"server": {"host": "${HOST:-0.0.0.0}"}}, {"HOST": "::1"}).server.host == "::1"


def test_an_empty_default_is_allowed() -> None:
    assert parse_config({"store": {"key_prefix": "gw${SUFFIX:-}"}}, {}).store.key_prefix == "gw"


def test_several_variables_expand_in_one_string() -> None:
    config = parse_config({"server": {"public_url": "https://${H}:${P}/"}}, {"H": "gw.example", "P": "443"})
    assert config.server.public_url == "https://gw.example:443/"


def test_an_unset_variable_is_reported_with_its_key_path() -> None:
    raw = {"backends": [http("search", headers={"Authorization": "Bearer ${SEARCH_TOKEN}"})]}
    assert error_of(raw) == "backends[0].headers.Authorization: environment variable SEARCH_TOKEN is not set"


def test_an_empty_variable_without_default_is_reported() -> None:
    assert error_of({"server": {"host": "${HOST}"}}, {"HOST": ""}) == (
        "server.host: environment variable HOST is not set"
    )


def test_expansion_applies_to_list_items() -> None:
    config = parse_config({"server": {"allowed_origins": ["${ORIGIN}"]}}, {"ORIGIN": "https://app.example"})
    assert config.server.allowed_origins == ("https://app.example",)


# ---------------------------------------------------------------- MCPGW_ overrides


def test_an_override_sets_a_key_with_its_yaml_type() -> None:
    config = parse_config({"server": {"port": 8080}}, {"MCPGW_SERVER__PORT": "9000"})
    assert config.server.port == 9000


def test_an_override_creates_a_missing_section() -> None:
    assert parse_config({}, {"MCPGW_STORE__KEY_PREFIX": "gw2"}).store.key_prefix == "gw2"


def test_an_override_reaches_nested_keys() -> None:
    config = parse_config({}, {"MCPGW_AUTH__JWT__LEEWAY_SECONDS": "5"})
    assert config.auth.jwt.leeway_seconds == 5.0


def test_an_override_can_set_a_list() -> None:
    config = parse_config({}, {"MCPGW_SERVER__ALLOWED_ORIGINS": '["https://a.example"]'})
    assert config.server.allowed_origins == ("https://a.example",)


def test_a_variable_without_a_double_underscore_is_not_an_override() -> None:
    assert parse_config({}, {"MCPGW_JWT_SECRET": "x" * 40, "MCPGW_PORT": "1"}) == Config()


def test_an_override_naming_an_unknown_key_is_reported() -> None:
    assert error_of({}, {"MCPGW_SERVER__BOGUS": "1"}) == "server.bogus: unknown key"


def test_an_override_of_the_wrong_type_is_reported_with_its_key_path() -> None:
    assert error_of({}, {"MCPGW_SERVER__PORT": "eighty"}) == "server.port: must be an integer"


def test_an_override_that_is_not_yaml_is_reported() -> None:
    assert error_of({}, {"MCPGW_SERVER__PORT": "[1"}) == "server.port: MCPGW_SERVER__PORT is not valid YAML"


# ---------------------------------------------------------------- unknown keys


def test_unknown_top_level_key_is_reported_with_its_path() -> None:
    assert error_of({"servre": {}}) == "servre: unknown key"


def test_unknown_key_is_reported_with_its_path() -> None:
    assert error_of({"server": {"hots": "x"}}) == "server.hots: unknown key"


def test_unknown_nested_key_is_reported_with_its_path() -> None:
    assert error_of({"auth": {"jwt": {"issuer": "i", "isuer": "x"}}}) == "auth.jwt.isuer: unknown key"


def test_unknown_key_in_a_list_item_is_reported_with_its_index() -> None:
    assert error_of({"backends": [stdio("a"), stdio("b", bogus=1)]}) == "backends[1].bogus: unknown key"


def test_unknown_key_in_a_tenant_is_reported_with_the_tenant_name() -> None:
    assert error_of({"tenants": {"acme": {"tools": {"alow": ["*"]}}}}) == "tenants.acme.tools.alow: unknown key"


def test_unknown_key_in_a_rate_limit_is_reported() -> None:
    raw = {"tenants": {"acme": {"rate_limit": {"requests_per_second": 1, "brust": 2}}}}
    assert error_of(raw) == "tenants.acme.rate_limit.brust: unknown key"


# ---------------------------------------------------------------- types and values

BAD_VALUES: list[tuple[str, dict[str, Any], str]] = [
    ("port-string", {"server": {"port": "80"}}, "server.port: must be an integer"),
    ("port-bool", {"server": {"port": True}}, "server.port: must be an integer"),
    ("port-float", {"server": {"port": 80.5}}, "server.port: must be an integer"),
    ("port-negative", {"server": {"port": -1}}, "server.port: must be an integer >= 0"),
    ("host-int", {"server": {"host": 1}}, "server.host: must be a string"),
    ("path-relative", {"server": {"path": "mcp"}}, "server.path: must start with /"),
    ("body-small", {"server": {"max_body_bytes": 10}}, "server.max_body_bytes: must be an integer >= 1024"),
    ("origins-string", {"server": {"allowed_origins": "x"}}, "server.allowed_origins: must be a list"),
    ("origins-item", {"server": {"allowed_origins": ["a", 2]}}, "server.allowed_origins[1]: must be a string"),
    ("grace-null", {"server": {"shutdown_grace_seconds": None}},
     "server.shutdown_grace_seconds: must be a number >= 0"),
    ("grace-string", {"server": {"shutdown_grace_seconds": "1"}}, "server.shutdown_grace_seconds: must be a number"),
    ("section-list", {"server": [1]}, "server: must be a mapping"),
    ("redis-scheme", {"store": {"redis_url": "http://r"}},
     "store.redis_url: must be a redis://, rediss:// or unix:// URL"),
    ("store-required", {"store": {"required": "yes"}}, "store.required: must be true or false"),
    ("bool-int", {"catalogue": {"validate_arguments": 1}}, "catalogue.validate_arguments: must be true or false"),
    ("separator", {"catalogue": {"separator": "::"}}, "catalogue.separator: must be 1-4 of A-Z a-z 0-9 _ . -"),
    ("refresh", {"catalogue": {"refresh_seconds": 0}}, "catalogue.refresh_seconds: must be a number >= 0.05"),
    ("page-size", {"catalogue": {"page_size": 0}}, "catalogue.page_size: must be an integer >= 1"),
    ("source", {"auth": {"token_sources": ["header", "cookie"]}},
     "auth.token_sources[1]: must be one of header, query, params"),
    ("alg", {"auth": {"jwt": {"algorithms": ["HS256", "none"]}}},
     "auth.jwt.algorithms[1]: unsupported algorithm 'none'"),
    ("alg-mix", {"auth": {"jwt": {"algorithms": ["RS256", "HS256"], "public_key_file": "k"}}},
     "auth.jwt.algorithms: do not mix HS* with asymmetric algorithms"),
    ("no-key", {"auth": {"jwt": {"algorithms": ["RS256"]}}},
     "auth.jwt.public_key_file: required (or jwks_url) for RS256"),
    ("short-secret", {"auth": {"jwt": {"secret": "short"}}}, "auth.jwt.secret: must be at least 32 bytes"),
    ("leeway", {"auth": {"jwt": {"leeway_seconds": -1}}}, "auth.jwt.leeway_seconds: must be a number >= 0"),
    ("key-hex", {"auth": {"api_keys": [{"sha256": "ab", "tenant": "t", "subject": "s"}]}},
     "auth.api_keys[0].sha256: must be 64 hex digits"),
    ("key-tenant", {"auth": {"api_keys": [{"sha256": "a" * 64, "subject": "s"}]}}, "auth.api_keys[0].tenant: required"),
    ("key-item", {"auth": {"api_keys": ["abc"]}}, "auth.api_keys[0]: must be a mapping"),
    ("metrics-port", {"metrics": {"port": 0}}, "metrics.port: must be an integer >= 1"),
    ("level", {"logging": {"level": "loud"}}, "logging.level: must be debug, info, warning or error"),
    ("format", {"logging": {"format": "xml"}}, "logging.format: must be auto, json or console"),
    ("admin-scope", {"admin": {"scope": ["a"]}}, "admin.scope: must be a string"),
    ("tenants-list", {"tenants": ["acme"]}, "tenants: must be a mapping"),
    ("tenant-list", {"tenants": {"acme": [1]}}, "tenants.acme: must be a mapping"),
    ("tenant-allow", {"tenants": {"acme": {"tools": {"allow": "*"}}}}, "tenants.acme.tools.allow: must be a list"),
    ("rate-missing", {"tenants": {"acme": {"rate_limit": {"burst": 2}}}},
     "tenants.acme.rate_limit.requests_per_second: must be a number >= 0.001"),
    ("burst", {"tenants": {"acme": {"rate_limit": {"requests_per_second": 1, "burst": 0}}}},
     "tenants.acme.rate_limit.burst: must be an integer >= 1"),
]


@pytest.mark.parametrize(("raw", "message"), [c[1:] for c in BAD_VALUES], ids=[c[0] for c in BAD_VALUES])
def test_a_bad_value_is_reported_with_its_key_path(raw: dict[str, Any], message: str) -> None:
    assert error_of(raw) == message


def test_an_integer_is_accepted_where_a_number_is_expected() -> None:
    config = parse_config({"server": {"shutdown_grace_seconds": 5}}, {})
    assert config.server.shutdown_grace_seconds == 5.0
    assert isinstance(config.server.shutdown_grace_seconds, float)


def test_the_log_level_is_case_insensitive() -> None:
    assert parse_config({"logging": {"level": "DEBUG"}}, {}).logging.level == "debug"


def test_an_empty_secret_is_an_error_naming_the_key() -> None:
    assert error_of({"auth": {"jwt": {"secret": ""}}}) == (
        "auth.jwt.secret: empty; give it a value, or null for no HS secret")


def test_a_null_secret_means_no_hs_secret() -> None:
    assert parse_config({"auth": {"jwt": {"secret": None}}}, {}).auth.jwt.secret is None


def test_a_secret_that_expands_to_nothing_is_an_error_naming_the_key() -> None:
    assert error_of({"auth": {"jwt": {"secret": "${JWT_SECRET:-}"}}}).startswith("auth.jwt.secret: empty")


def test_api_key_hashes_are_lower_cased() -> None:
    raw = {"auth": {"api_keys": [{"sha256": "AB" * 32, "tenant": "acme", "subject": "bot"}]}, "tenants": {"acme": {}}}
    assert parse_config(raw, {}).auth.api_keys == (ApiKeyConfig(sha256="ab" * 32, tenant="acme", subject="bot"),)


def test_a_port_above_65535_is_reported_with_its_key_path() -> None:
    assert error_of({"server": {"port": 70000}}).startswith("server.port: ")


# ---------------------------------------------------------------- backends


def test_backends_keep_their_order_and_default_the_namespace_to_the_name() -> None:
    config = parse_config({"backends": [http("search"), stdio("clock", namespace="")]}, {})
    assert [(b.name, b.namespace, b.transport) for b in config.backends] == [
        ("search", "search", "http"), ("clock", "", "stdio"),
    ]
    assert config.backend("clock") is config.backends[1]
    assert config.backend("nope") is None


def test_a_header_number_becomes_a_string() -> None:
    assert parse_config({"backends": [http("a", headers={"X-N": 5})]}, {}).backends[0].headers == {"X-N": "5"}


def test_a_missing_backend_url_is_reported_with_its_index() -> None:
    message = error_of({"backends": [http("a"), {"name": "b", "transport": "http"}]})
    assert message == "backends[1].url: required, an http:// or https:// URL"


def test_a_non_http_backend_url_is_reported() -> None:
    message = error_of({"backends": [http("a", url="ftp://a")]})
    assert message == "backends[0].url: required, an http:// or https:// URL"


def test_a_missing_backend_name_is_reported() -> None:
    assert error_of({"backends": [{"transport": "stdio", "command": ["x"]}]}) == "backends[0].name: required"


def test_a_missing_transport_is_reported() -> None:
    assert error_of({"backends": [{"name": "a"}]}) == "backends[0].transport: required"


def test_an_unknown_transport_is_reported() -> None:
    message = error_of({"backends": [{"name": "a", "transport": "grpc"}]})
    assert message == "backends[0].transport: must be http or stdio"


def test_a_stdio_backend_needs_a_command() -> None:
    assert error_of({"backends": [{"name": "a", "transport": "stdio"}]}) == (
        "backends[0].command: required for transport stdio"
    )


@pytest.mark.parametrize("name", ["Search", "-a", "a_b", "a" * 33, "a__b", ""])
def test_a_backend_name_outside_the_pattern_is_reported(name: str) -> None:
    assert error_of({"backends": [stdio(name)]}) == "backends[0].name: must match ^[a-z0-9][a-z0-9-]{0,31}$"


def test_an_invalid_namespace_is_reported() -> None:
    assert error_of({"backends": [stdio("a", namespace="a b")]}) == (
        "backends[0].namespace: must match ^[A-Za-z0-9_.-]{0,32}$"
    )


def test_a_duplicate_backend_name_is_reported() -> None:
    assert error_of({"backends": [stdio("a"), stdio("b"), stdio("a")]}) == "backends[2].name: duplicate backend 'a'"


def test_backends_must_be_a_list() -> None:
    assert error_of({"backends": {"a": stdio("a")}}) == "backends: must be a list"


def test_a_backend_timeout_must_be_positive() -> None:
    assert error_of({"backends": [stdio("a", timeout_seconds=0)]}) == (
        "backends[0].timeout_seconds: must be a number >= 0.001"
    )


# ---------------------------------------------------------------- tenants and references


def test_a_tenant_gets_its_policy() -> None:
    raw = {
        "backends": [http("search")],
        "tenants": {"acme": {
            "backends": ["search"], "tools": {"allow": ["search__*"], "deny": ["search__delete_*"]},
            "rate_limit": {"requests_per_second": 50, "burst": 100},
            "backend_headers": {"search": {"X-Api-Key": "${ACME_KEY}"}},
        }},
    }
    assert parse_config(raw, {"ACME_KEY": "k"}).tenants["acme"] == TenantConfig(
        name="acme", backends=("search",), tools_allow=("search__*",), tools_deny=("search__delete_*",),
        rate_limit=RateLimitConfig(requests_per_second=50.0, burst=100),
        backend_headers={"search": {"X-Api-Key": "k"}},
    )


def test_a_tenant_gets_prompt_and_resource_globs() -> None:
    raw = {"tenants": {"acme": {"prompts": {"deny": ["x__*"]}, "resources": {"allow": ["x+file:///*"]}}}}
    tenant = parse_config(raw, {}).tenants["acme"]
    assert (tenant.prompts_allow, tenant.prompts_deny) == (("*",), ("x__*",))
    assert (tenant.resources_allow, tenant.resources_deny) == (("x+file:///*",), ())


@pytest.mark.parametrize(("raw", "error"), [
    ({"prompts": {"allow": "*"}}, "tenants.acme.prompts.allow: must be a list"),
    ({"resources": {"dney": []}}, "tenants.acme.resources.dney: unknown key"),
])
def test_bad_prompt_or_resource_globs_name_their_key(raw: dict[str, Any], error: str) -> None:
    assert error_of({"tenants": {"acme": raw}}) == error


def test_an_empty_tenant_sees_everything_without_a_rate_limit() -> None:
    assert parse_config({"tenants": {"acme": None}}, {}).tenants["acme"] == TenantConfig(name="acme")


def test_a_tenant_naming_an_unknown_backend_is_reported() -> None:
    raw = {"backends": [stdio("a")], "tenants": {"acme": {"backends": ["a", "b"]}}}
    assert error_of(raw) == "tenants.acme.backends[1]: unknown backend 'b'"


def test_backend_headers_for_an_unknown_backend_are_reported() -> None:
    raw = {"tenants": {"acme": {"backend_headers": {"ghost": {"X": "y"}}}}}
    assert error_of(raw) == "tenants.acme.backend_headers.ghost: unknown backend"


def test_a_bad_tenant_backend_header_is_reported_with_its_key_path() -> None:
    raw = {"backends": [http("search")], "tenants": {"acme": {"backend_headers": {"search": {"X-Key": [1]}}}}}
    assert error_of(raw) == "tenants.acme.backend_headers.search.X-Key: must be a string"


@pytest.mark.parametrize("value", ["k\r\nX-Evil: 1", "k\nX-Evil: 1", "nul\0"])
def test_a_header_value_that_would_break_its_line_is_refused(value: str) -> None:
    assert error_of({"backends": [http("search", headers={"X-Key": value})]}) == (
        "backends[0].headers.X-Key: line breaks and NUL are not allowed in a header value")
    raw = {"backends": [http("search")], "tenants": {"acme": {"backend_headers": {"search": {"X-Key": value}}}}}
    assert error_of(raw) == (
        "tenants.acme.backend_headers.search.X-Key: line breaks and NUL are not allowed in a header value")


@pytest.mark.parametrize("name", ["X Key", "X-Key:", "Bad\r\nName", ""])
def test_a_header_name_that_is_not_a_token_is_refused(name: str) -> None:
    assert error_of({"backends": [http("search", headers={name: "v"})]}) == (
        f"backends[0].headers.{name}: not a valid HTTP header name")


def test_an_api_key_for_an_unknown_tenant_is_reported() -> None:
    raw = {"auth": {"api_keys": [{"sha256": "a" * 64, "tenant": "ghost", "subject": "s"}]}}
    assert error_of(raw) == "auth.api_keys[0].tenant: unknown tenant 'ghost'"


def test_an_unknown_anonymous_tenant_is_reported() -> None:
    assert error_of({"auth": {"anonymous_tenant": "ghost"}}) == "auth.anonymous_tenant: unknown tenant 'ghost'"


def test_an_asymmetric_algorithm_accepts_a_jwks_url() -> None:
    config = parse_config({"auth": {"jwt": {"algorithms": ["ES256"], "jwks_url": "https://idp/jwks"}}}, {})
    assert (config.auth.jwt.algorithms, config.auth.jwt.jwks_url) == (("ES256",), "https://idp/jwks")


def test_the_secret_is_long_enough_at_32_bytes() -> None:
    assert parse_config({"auth": {"jwt": {"secret": SECRET}}}, {}).auth.jwt.secret == SECRET


def test_parsing_does_not_change_the_raw_mapping() -> None:
    raw = {"server": {"host": "${HOST:-h}", "port": 1}, "backends": [stdio("a")]}
    parse_config(raw, {"MCPGW_SERVER__PORT": "2", "HOST": "x"})
    assert raw == {"server": {"host": "${HOST:-h}", "port": 1}, "backends": [stdio("a")]}


def test_the_config_objects_are_frozen() -> None:
    config = parse_config({}, {})
    with pytest.raises(AttributeError):
        config.server.port = 1  # type: ignore[misc]


# ---------------------------------------------------------------- typed backends and nulls


def test_each_transport_gets_its_own_backend_type_with_the_model_defaults() -> None:
    config = parse_config({"backends": [http("search"), stdio("clock")]}, {})
    assert config.backends == (
        HttpBackend(name="search", namespace="search", url="http://search:8000/mcp"),
        StdioBackend(name="clock", namespace="clock", command=("python", "-m", "clock")),
    )
    assert [b.transport for b in config.backends] == ["http", "stdio"]


def test_keys_of_the_other_transport_are_accepted_and_ignored() -> None:
    config = parse_config({"backends": [stdio("clock", url="http://x/mcp", headers={"X": "y"})]}, {})
    assert config.backends[0] == StdioBackend(name="clock", namespace="clock", command=("python", "-m", "clock"))


def test_null_means_none_where_none_is_the_default_and_empty_for_lists() -> None:
    config = parse_config({"server": {"public_url": None, "allowed_origins": None}, "metrics": {"port": None}}, {})
    assert (config.server.public_url, config.server.allowed_origins, config.metrics.port) == (None, (), None)


@pytest.mark.parametrize(("raw", "message"), [
    ({"server": {"port": None}}, "server.port: must be an integer"),
    ({"server": {"host": None}}, "server.host: must be a string"),
    ({"catalogue": {"validate_arguments": None}}, "catalogue.validate_arguments: must be true or false"),
    ({"backends": [stdio("a", max_queue=None)]}, "backends[0].max_queue: must be an integer"),
])
def test_null_elsewhere_is_reported_as_a_value_of_the_wrong_kind(raw: dict[str, Any], message: str) -> None:
    assert error_of(raw) == message


def test_the_contract_path_config_gateway_yaml_is_the_shipped_default() -> None:
    """DESIGN's `config/gateway.yaml` stays a working path in the repository: it is the packaged default."""
    contract = SHIPPED.parents[1] / "config" / "gateway.yaml"
    assert contract.resolve() == SHIPPED.resolve()
    assert load_config(contract) == load_config(SHIPPED)
