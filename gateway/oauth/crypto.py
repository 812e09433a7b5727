"""Sealing what the gateway stores for its users (grants, cached tokens): AES-256-GCM, keys rotated.

`oauth.keys` lists the keys, each 32 bytes written as base64 or base64url (`config.outbound.parse_key`): the first
seals, every one opens. A sealed value names its key by a short id, so adding a new key in front
and keeping the old ones behind it rotates without a pause; a value opened with an older key is
reported stale, and its reader seals it again with the current one. The storage key a value is
kept under is its associated data: a blob copied under another user's key does not open.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE_BYTES = 12
KEY_ID_BYTES = 4
VERSION = b"\x01"


class SealError(Exception):
    """A stored value does not open: an unknown key, a forged or moved blob, garbage."""


class KeyRing:
    """The configured keys: the first seals, all open (see the module docstring)."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys:
            raise ValueError("at least one key is needed")
        self._keys = [(hashlib.sha256(key).digest()[:KEY_ID_BYTES], AESGCM(key)) for key in keys]
        self._by_id = dict(reversed(self._keys))  # two equal ids (never in practice): the first key wins

    def seal(self, plaintext: bytes, where: str) -> str:
        key_id, aead = self._keys[0]
        nonce = os.urandom(NONCE_BYTES)
        blob = VERSION + key_id + nonce + aead.encrypt(nonce, plaintext, where.encode())
        return base64.urlsafe_b64encode(blob).decode()

    def open(self, sealed: str | bytes, where: str) -> tuple[bytes, bool]:
        """The plaintext, and whether it was sealed with another key than the current one (reseal it)."""
        try:
            blob = base64.urlsafe_b64decode(sealed)
        except (binascii.Error, ValueError):
            raise SealError("not a sealed value") from None
        header = len(VERSION) + KEY_ID_BYTES
        if len(blob) < header + NONCE_BYTES + 16 or blob[:1] != VERSION:
            raise SealError("not a sealed value")
        key_id, nonce, ciphertext = blob[1:header], blob[header:header + NONCE_BYTES], blob[header + NONCE_BYTES:]
        aead = self._by_id.get(key_id)
        if aead is None:
            raise SealError("sealed with a key that is no longer configured")
        try:
            plaintext = aead.decrypt(nonce, ciphertext, where.encode())
        except InvalidTag:
            raise SealError("does not open (forged, damaged, or stored under another name)") from None
        return plaintext, key_id != self._keys[0][0]
