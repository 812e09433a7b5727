"""Reading a config: the file, then the environment, then typed sections (see gateway.config)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from gateway.config.environment import expand
from gateway.config.model import Config
from gateway.config.overrides import apply_overrides
from gateway.config.reader import ConfigError, Section, mapping
from gateway.config.sections import build_config

DEFAULT_CONFIG = Path(str(files("gateway") / "default_config.yaml"))
"""The demo config, shipped inside the package so an installed gateway runs without the repository."""
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser when PyYAML has it: the same documents and objects as the pure-Python one, and several
times faster on a config of thousands of tenants (read again on every reload)."""


def load_config(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read, expand, override and validate a config file."""
    env = os.environ if environ is None else environ
    file = Path(path) if path else DEFAULT_CONFIG
    try:
        raw = yaml.load(file.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(f"{file}: not valid YAML ({detail})") from exc
    return parse_config(raw if raw is not None else {}, env)


def parse_config(raw: Any, environ: Mapping[str, str]) -> Config:
    """A Config from an already decoded YAML document (the raw mapping is left unchanged)."""
    data = apply_overrides(mapping(expand(raw, environ), ""), environ)
    return build_config(Section(data, "", Config))
