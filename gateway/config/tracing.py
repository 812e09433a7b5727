"""The `tracing` section: where spans go (OTLP over HTTP or gRPC), which are kept, and what they may carry."""

from __future__ import annotations

from urllib.parse import urlsplit

from gateway.config.model import TRACE_PROTOCOLS, TRACE_SAMPLERS, TracingConfig
from gateway.config.reader import ConfigError, Section


def tracing_section(s: Section) -> TracingConfig:
    protocol = _choice(s, "protocol", TRACE_PROTOCOLS)
    sampler = _choice(s, "sampler", TRACE_SAMPLERS)
    endpoint = s.get("endpoint", str) or None
    if endpoint is not None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"{s.where('endpoint')}: must be an http:// or https:// URL")
        if parts.username or parts.password:
            raise ConfigError(f"{s.where('endpoint')}: no credentials in the URL (use tracing.headers)")
    ratio = s.get("ratio", float)
    if ratio is not None and not 0.0 <= ratio <= 1.0:
        raise ConfigError(f"{s.where('ratio')}: must be between 0 and 1")
    timeout = s.get("timeout_seconds", float)
    if timeout is not None and timeout <= 0:
        raise ConfigError(f"{s.where('timeout_seconds')}: must be a number > 0")
    return TracingConfig(
        enabled=s.get("enabled", bool),
        protocol=protocol,
        endpoint=endpoint,
        headers=s.header_map("headers"),
        timeout_seconds=timeout,
        sampler=sampler,
        ratio=ratio,
        service_name=s.get("service_name", str) or None,
        resource_attributes=s.string_map("resource_attributes"),
        max_queue_size=s.integer("max_queue_size", minimum=1),
        capture_arguments=s.get("capture_arguments", bool),
        capture_results=s.get("capture_results", bool),
        record_subject=s.get("record_subject", bool),
    )


def _choice(s: Section, key: str, allowed: tuple[str, ...]) -> str | None:
    value = s.get(key, str) or None
    if value is not None and value not in allowed:
        raise ConfigError(f"{s.where(key)}: must be one of {', '.join(allowed)}")
    return value
