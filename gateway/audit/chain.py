"""Tamper evidence: each record is sealed with an HMAC over itself and the MAC of the record before it.

A chain is one writer's sequence of records: every gateway process starts a new one (a random id) at
`seq` 0 with an empty `prev`, and each record after carries the MAC of the one before. Changing a
record breaks its own MAC; removing one leaves a gap in `seq` and a `prev` that names no record;
reordering sends `seq` backwards. Without the key nobody can write a record that passes, so an
edited trail cannot be sealed again. Several chains may share a file (restarts) or a Redis Stream
(replicas); `verify` follows each on its own.

The MAC covers the record's canonical JSON (record.canonical) without its `mac` field, so it does
not depend on the order of a line's keys or on how a sink stores it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

import orjson

from gateway.audit.record import canonical

CHAIN, SEQ, PREV, MAC = "chain", "seq", "prev", "mac"


def new_chain_id() -> str:
    return secrets.token_hex(8)


def mac_of(key: bytes, record: dict[str, Any]) -> str:
    """The record's MAC: HMAC-SHA256 of its canonical JSON, its own `mac` left out."""
    body = canonical({k: v for k, v in record.items() if k != MAC})
    return hmac.digest(key, body, "sha256").hex()


class Hmac:
    """HMAC-SHA256 (RFC 2104) with the key's two padded blocks hashed once: each MAC copies them. OpenSSL's
    one-shot HMAC looks the digest up again on every call, which cost as much as hashing the record."""

    def __init__(self, key: bytes) -> None:
        if len(key) > BLOCK:
            key = hashlib.sha256(key).digest()
        key = key.ljust(BLOCK, b"\0")
        self.inner = hashlib.sha256(bytes(b ^ 0x36 for b in key))
        self.outer = hashlib.sha256(bytes(b ^ 0x5C for b in key))

    def hex(self, message: bytes) -> str:
        inner, outer = self.inner.copy(), self.outer.copy()
        inner.update(message)
        outer.update(inner.digest())
        return outer.hexdigest()


BLOCK = 64
"""SHA-256's block size, which HMAC pads its key to."""


class Chain:
    """Seals records in order; one per writer (the trail's, in the process that writes them)."""

    def __init__(self, key: bytes | None, chain_id: str | None = None) -> None:
        self.mac = Hmac(key) if key is not None else None
        self.id = chain_id or new_chain_id()
        self.seq = 0
        self.prev = ""

    def seal(self, record: dict[str, Any], *, ordered: bool = False) -> bytes:
        """The record as one JSON line, without its newline (its chain fields set); without a key, `seq` orders it
        but no MAC. `ordered`: its keys are in canonical order already, at every depth (sorting them cost a fifth).
        (A call's record is sealed where it is made, record.RecordMaker.line: the same steps.)"""
        record[CHAIN], record[SEQ], record[PREV] = self.id, self.seq, self.prev
        self.seq += 1
        body = orjson.dumps(record) if ordered else canonical(record)
        return body if self.mac is None else self.macked(body)

    def macked(self, body: bytes) -> bytes:
        """The line of a record encoded canonically (`body`, its `prev` this chain's last MAC), its MAC added last,
        once: a reader takes it off and encodes the rest canonically again. It is the next record's `prev`."""
        assert self.mac is not None
        self.prev = mac = self.mac.hex(body)
        return b'%b,"mac":"%b"}' % (body[:-1], mac.encode())
