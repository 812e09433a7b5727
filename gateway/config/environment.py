"""The environment's part in a config: `${VAR}` / `${VAR:-default}` expansion inside string
values (MCPGW_ overrides of single keys are gateway.config.overrides)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gateway.config.reader import ConfigError, join

ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


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
