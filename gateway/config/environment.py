"""The environment's part in a config: `${VAR}` / `${VAR:-default}` expansion inside string
values, and `MCPGW_<SECTION>__<KEY>[__<KEY>…]` variables overriding single keys (the value is
read as YAML, so `MCPGW_SERVER__PORT=9000` is an int)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from gateway.config.reader import ConfigError, join

ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
ENV_OVERRIDE_PREFIX = "MCPGW_"


def expand(value: Any, env: Mapping[str, str], path: str = "") -> Any:
    """A copy of `value` with every `${VAR}` in its strings replaced; an unset one is reported."""
    if isinstance(value, str):
        return _expand_string(value, env, path)
    if isinstance(value, dict):
        return {k: expand(v, env, join(path, str(k))) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, env, f"{path}[{i}]") for i, v in enumerate(value)]
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


def apply_overrides(data: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """Set each key an MCPGW_ variable names, creating sections on the way (changes `data`)."""
    for name, text in sorted(env.items()):
        if name.startswith(ENV_OVERRIDE_PREFIX) and "__" in name:
            _override(data, name, text)
    return data


def _override(data: dict[str, Any], name: str, text: str) -> None:
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
