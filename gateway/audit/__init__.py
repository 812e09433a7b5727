"""The audit trail: one tamper-evident record per call, prompt, read, completion, subscription and admin action.

    record.py      what a record holds; the arguments' digest and redaction (pure)
    chain.py       the HMAC chain that seals each record to the one before
    trail.py       bounded queues off the request path, the block/drop policy, one writer per sink
    sinks.py       the rotated JSON-lines file and stdout
    redis_sink.py  the Redis Stream (XADD MAXLEN ~), each record once
    verify.py      `mcp-gateway audit verify`: a trail unbroken, or its first bad record named
    tail.py        `mcp-gateway audit tail`: the Redis trail, filtered, for a terminal or as JSON

With `audit.enabled` false nothing here is built: the dispatcher's one check is `trail is None`.
"""

from __future__ import annotations

from gateway.audit.chain import Chain
from gateway.audit.record import AUDITED_METHODS, Entry, RecordMaker, client_of
from gateway.audit.redis_sink import RedisSink, stream_key
from gateway.audit.sinks import FileSink, Sink, StdoutSink
from gateway.audit.trail import AuditTrail, Dropped
from gateway.config import Config

__all__ = ["AUDITED_METHODS", "AuditTrail", "Entry", "client_of", "open_trail"]


def open_trail(config: Config, *, on_dropped: Dropped) -> AuditTrail | None:
    """The trail `config.audit` asks for (not started), or None when auditing is off."""
    audit = config.audit
    if not audit.enabled:
        return None
    chain = Chain(audit.hmac_key.encode() if audit.hmac_key else None)
    maker = RecordMaker(arguments=audit.arguments, redact_keys=audit.redact_keys,
                        redact_pointers=audit.redact_pointers, chain=chain)
    return AuditTrail(maker=maker, chain=chain, sinks=_sinks(config), queue_size=audit.queue_size,
                      policy=audit.policy, on_dropped=on_dropped)


def _sinks(config: Config) -> list[Sink]:
    audit = config.audit
    sinks: list[Sink] = []
    if audit.file:
        sinks.append(FileSink(audit.file, max_bytes=audit.file_max_bytes, rotate_seconds=audit.file_rotate_seconds,
                              keep=audit.file_keep))
    url = audit.redis_url or config.store.redis_url
    if audit.redis and url:
        from gateway.store.client import create_client  # redis only when a trail goes there

        sinks.append(RedisSink(create_client(url),
                               stream_key(config.store.key_prefix, audit.redis_stream), max_len=audit.redis_max_len))
    if audit.stdout:
        sinks.append(StdoutSink())
    return sinks
