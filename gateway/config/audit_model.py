"""The `audit` section's model (gateway.config.audit reads it): sinks, queue policy, the chain's key."""

from __future__ import annotations

from dataclasses import dataclass

AUDIT_POLICIES = ("block", "drop")
"""What a record meets when a sink's queue is full: wait for room (the reply waits too), or be dropped and counted."""
ARGUMENT_MODES = ("digest", "redacted")
"""digest: only the SHA-256 of the arguments' canonical JSON; redacted: the arguments too, secrets masked."""
DEFAULT_REDACT_KEYS = ("*token*", "*secret*", "*password*", "*passwd*", "*api_key*", "*apikey*", "authorization",
                       "cookie", "*credential*", "*private_key*")
MIN_KEY_BYTES = 32


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """The audit trail (gateway.audit): one record per call, prompt, read, completion, subscription and admin
    action, written off the request path to a JSON-lines file, a Redis Stream and/or stdout."""

    enabled: bool = False
    file: str | None = None  # the JSON-lines trail; null: no file
    file_max_bytes: int = 100 * 1024 * 1024  # rotated when it would grow past this
    file_rotate_seconds: float = 86400.0  # and when it is this old; 0: never by age
    file_keep: int = 10  # rotated files kept (FILE.1 is the newest)
    redis: bool = False  # XADD each record to a stream on redis_url
    redis_url: str | None = None  # the stream's Redis; null: store.redis_url
    redis_stream: str = "audit"  # the stream's key, after store.key_prefix
    redis_max_len: int = 1_000_000  # XADD MAXLEN ~: the stream keeps about this many records
    stdout: bool = False  # one JSON line per record on stdout (containers)
    queue_size: int = 10_000  # records waiting for each sink
    policy: str = "block"  # AUDIT_POLICIES: what a record does when a sink's queue is full
    required: bool = False  # a sink that cannot write makes the gateway not ready
    hmac_key: str | None = None  # chains each record to the one before (>= 32 bytes); null: no chain MAC
    arguments: str = "digest"  # ARGUMENT_MODES
    redact_keys: tuple[str, ...] = DEFAULT_REDACT_KEYS  # globs on argument key names (any depth, any case)
    redact_pointers: tuple[str, ...] = ()  # JSON pointers (RFC 6901) into the arguments, masked too
