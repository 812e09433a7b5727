"""The `audit` section: which sinks get the audit trail, what a full queue does, and the chain's key."""

from __future__ import annotations

from gateway.config.audit_model import ARGUMENT_MODES, AUDIT_POLICIES, MIN_KEY_BYTES, AuditConfig
from gateway.config.reader import ConfigError, Section
from gateway.config.redis_urls import StoreUrlError, check_store_url


def audit_section(s: Section) -> AuditConfig:
    policy, arguments = _choice(s, "policy", AUDIT_POLICIES), _choice(s, "arguments", ARGUMENT_MODES)
    key = s.get("hmac_key", str)
    if key is not None and len(key.encode()) < MIN_KEY_BYTES:  # "" too: a blank "${VAR:-}" is no key
        raise ConfigError(f"{s.where('hmac_key')}: must be at least {MIN_KEY_BYTES} bytes, or null")
    pointers = s.strings("redact_pointers")
    for i, pointer in enumerate(pointers):
        if pointer and not pointer.startswith("/"):
            raise ConfigError(f"{s.where('redact_pointers')}[{i}]: a JSON pointer starts with /")
    stream = s.get("redis_stream", str)
    if not stream:
        raise ConfigError(f"{s.where('redis_stream')}: must not be empty")
    config = AuditConfig(
        enabled=s.get("enabled", bool), file=s.get("file", str) or None,
        file_max_bytes=s.integer("file_max_bytes", minimum=4096), file_rotate_seconds=s.number("file_rotate_seconds"),
        file_keep=s.integer("file_keep", minimum=1), redis=s.get("redis", bool), redis_url=_url(s),
        redis_stream=stream,
        redis_max_len=s.integer("redis_max_len", minimum=1000), stdout=s.get("stdout", bool),
        queue_size=s.integer("queue_size", minimum=1), policy=policy, required=s.get("required", bool),
        hmac_key=key, arguments=arguments, redact_keys=s.strings("redact_keys"), redact_pointers=pointers)
    if config.enabled and not (config.file or config.redis or config.stdout):
        raise ConfigError(f"{s.path}: enabled with no sink (set file, redis or stdout)")
    return config


def _url(s: Section) -> str | None:
    url = s.get("redis_url", str) or None
    if url is not None:
        try:
            check_store_url(url)
        except StoreUrlError as exc:
            raise ConfigError(f"{s.where('redis_url')}: {exc}") from exc
    return url


def _choice(s: Section, key: str, allowed: tuple[str, ...]) -> str:
    value = s.get(key, str)
    if value not in allowed:
        raise ConfigError(f"{s.where(key)}: must be {' or '.join(allowed)}")
    return value
