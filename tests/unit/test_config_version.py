"""The config version the status page shows per replica: equal for equal settings in any process."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

from gateway.config import ApiKeyConfig, AuthConfig, Config, TenantConfig, parse_config
from gateway.config.version import config_version

RAW = {"auth": {"jwt": {"secret": "x" * 32}, "api_keys": [{"sha256": "a" * 64, "tenant": "t", "subject": "s",
                                                           "scopes": ["b", "a", "c"]}]},
       "backends": [{"name": "calc", "transport": "stdio", "command": ["python", "-m", "calc"]}],
       "tenants": {"t": {"backends": ["*"]}, "u": {"backends": ["calc"]}}}

SCRIPT = """
from gateway.config import parse_config
from gateway.config.version import config_version
print(config_version(parse_config({raw!r}, {{}})))
"""


def test_the_version_is_twelve_hex_characters_and_follows_every_value() -> None:
    config = parse_config(RAW, {})
    version = config_version(config)
    assert len(version) == 12 and int(version, 16) >= 0
    assert config_version(parse_config(RAW, {})) == version
    assert config_version(replace(config, tenants={**config.tenants, "v": TenantConfig("v")})) != version
    secret = replace(config, auth=replace(config.auth, jwt=replace(config.auth.jwt, secret="y" * 32)))
    assert config_version(secret) != version


def test_the_order_of_tenants_does_not_matter_but_the_order_of_backends_does() -> None:
    config = parse_config(RAW, {})
    assert config_version(replace(config, tenants=dict(reversed(config.tenants.items())))) == config_version(config)
    two = replace(config, backends=(*config.backends, replace(config.backends[0], name="other", namespace="other")))
    swapped = replace(two, backends=tuple(reversed(two.backends)))
    assert config_version(two) != config_version(swapped)  # the first listed wins a collision


def test_processes_with_other_hash_seeds_agree() -> None:
    """Sets (a key's scopes, say) are written sorted: a replica's hash seed changes nothing."""
    config = Config(auth=AuthConfig(api_keys=(ApiKeyConfig("a" * 64, "t", "s", frozenset({"x", "y", "z"})),)))  # type: ignore[arg-type]
    assert config_version(config) == config_version(config)
    versions = {subprocess.run([sys.executable, "-c", SCRIPT.format(raw=RAW)], capture_output=True, text=True,
                               check=True, env={"PYTHONHASHSEED": seed}).stdout.strip() for seed in ("1", "2", "3")}
    assert versions == {config_version(parse_config(RAW, {}))}
