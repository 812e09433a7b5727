"""MCPGW_ environment overrides: names keep their case, never create a tenant or backend, secrets never go blank."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import ConfigError, parse_config

SECRET = "s" * 32
FILE: dict[str, Any] = {
    "auth": {"jwt": {"secret": SECRET}},
    "backends": [{"name": "search", "transport": "http", "url": "http://search:8000/mcp"},
                 {"name": "clock", "transport": "stdio", "command": ["python", "-m", "clock"], "env": {"TZ": "UTC"}}],
    "tenants": {"Acme": {"backends": ["search"], "rate_limit": {"requests_per_second": 50, "burst": 100}},
                "globex": {"backends": ["clock"]}},
}


def parsed(environ: dict[str, str]) -> Any:
    return parse_config(FILE, environ)


def error_of(environ: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as info:
        parsed(environ)
    return str(info.value)


@pytest.mark.parametrize("variable", ["MCPGW_TENANTS__Acme__RATE_LIMIT__REQUESTS_PER_SECOND",
                                      "MCPGW_TENANTS__ACME__RATE_LIMIT__REQUESTS_PER_SECOND"])
def test_an_override_changes_the_tenant_the_file_names_whatever_its_case(variable: str) -> None:
    config = parsed({variable: "5"})
    assert set(config.tenants) == {"Acme", "globex"}
    assert config.tenants["Acme"].rate_limit.requests_per_second == 5.0
    assert config.tenants["Acme"].backends == ("search",)


def test_an_override_naming_an_unknown_tenant_is_an_error_naming_it() -> None:
    assert error_of({"MCPGW_TENANTS__initech__BACKENDS": '["*"]'}) == (
        "tenants.initech: MCPGW_TENANTS__initech__BACKENDS names a tenant the config file does not define")


def test_a_whole_tenant_can_be_replaced_but_not_created() -> None:
    assert parsed({"MCPGW_TENANTS__globex": "{backends: [search]}"}).tenants["globex"].backends == ("search",)
    assert error_of({"MCPGW_TENANTS__initech": "{backends: ['*']}"}).startswith("tenants.initech: ")


def test_two_tenants_differing_only_in_case_make_an_upper_case_override_ambiguous() -> None:
    raw = {"tenants": {"Acme": {}, "acme": {}}}
    with pytest.raises(ConfigError, match=r"^ACME: MCPGW_TENANTS__ACME__BACKENDS could mean Acme or acme$"):
        parse_config(raw, {"MCPGW_TENANTS__ACME__BACKENDS": "[]"})


def test_a_backend_is_addressed_by_its_name() -> None:
    config = parsed({"MCPGW_BACKENDS__search__URL": "http://search.internal:9000/mcp",
                     "MCPGW_BACKENDS__CLOCK__TIMEOUT_SECONDS": "3"})
    assert config.backend("search").url == "http://search.internal:9000/mcp"
    assert config.backend("clock").timeout_seconds == 3.0
    assert [b.name for b in config.backends] == ["search", "clock"]


def test_an_override_naming_an_unknown_backend_is_an_error_naming_it() -> None:
    assert error_of({"MCPGW_BACKENDS__ghost__URL": "http://x/mcp"}) == (
        "backends.ghost: MCPGW_BACKENDS__ghost__URL names a backend the config file does not define")


def test_a_backend_env_variable_keeps_its_case() -> None:
    config = parsed({"MCPGW_BACKENDS__clock__ENV__Api_Key": "k", "MCPGW_BACKENDS__clock__ENV__TZ": "Europe/Paris"})
    assert config.backend("clock").env == {"TZ": "Europe/Paris", "Api_Key": "k"}


@pytest.mark.parametrize("blank", ["", "null", "~"])
def test_a_blank_secret_from_the_environment_is_an_error_naming_the_key(blank: str) -> None:
    assert error_of({"MCPGW_AUTH__JWT__SECRET": blank}) == (
        "auth.jwt.secret: MCPGW_AUTH__JWT__SECRET is empty; unset it to keep the file's value")


def test_sections_and_keys_still_match_in_any_case() -> None:
    assert parsed({"MCPGW_SERVER__PORT": "9000", "MCPGW_auth__jwt__leeway_seconds": "1"}).server.port == 9000


def test_a_tenant_without_backends_sees_nothing() -> None:
    config = parse_config({"backends": FILE["backends"], "tenants": {"newco": {}}}, {})
    assert config.tenants["newco"].backends == ()
