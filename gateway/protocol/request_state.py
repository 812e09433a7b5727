"""The sealed `requestState` of a multi-round trip, and what it binds. Pure.

A 2026-07-28 client echoes `requestState` verbatim on its retry, and whoever holds it may change
it, so it is never trusted (../shared/PROTOCOL-2026.md §B.2). It reads `v1.<payload>.<tag>`: the
payload (base64url JSON) names the parked call (round id, step, the replica holding it), or, for a
2026 backend's own InputRequiredResult passed through, that backend and its state as it made it
(`Passed`: nothing is held, so any replica serves the retry). Either way it binds it to the
principal (a keyed digest of tenant and subject), the method, the called name or URI, a digest of
the arguments and an expiry; the tag is HMAC-SHA256 over `v1.<payload>` with the
gateway's key. Every mismatch gets the official SDK's frozen answer, -32602 "Invalid or expired
requestState"; the real reason is for the log only (`InvalidState.reason`).

A task handle (the tasks extension) is sealed the same way with another prefix, `t1.`, so neither
passes for the other: it names a 2026 backend and that backend's taskId, bound to the tenant and the
principal digest. It has no expiry of its own (the backend's task has its ttlMs); anything that does
not open as this caller's handle is -32602 "Unknown task", as a backend answers an unknown taskId.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.protocol import spec
from gateway.protocol.errors import InvalidParams

VERSION = "v1"
TASK_VERSION = "t1"
UNKNOWN_TASK = "Unknown task"
INVALID_STATE = "Invalid or expired requestState"
"""The SDK's wire message for every refused state (mcp/server/request_state.py `_reject`)."""
INPUT_METHODS = frozenset({spec.TOOLS_CALL, spec.PROMPTS_GET, spec.RESOURCES_READ})
"""The only requests a server may answer with an InputRequiredResult (and that may carry one's answers)."""
MAX_STATE_CHARS = 65_536
"""Ours are a few hundred characters plus a backend's own state; anything longer is refused before any work."""

MAX_KEYS = 4
"""Keys kept to open states with (a new shared key pushes the oldest out)."""

Principal = tuple[str, str]
"""(tenant, subject): whose call a round is."""


class InvalidState(InvalidParams):
    """A `requestState` that cannot be honoured: forged, altered, expired, someone else's, or its round gone."""

    def __init__(self, reason: str) -> None:
        super().__init__(INVALID_STATE, data={"reason": "invalid_request_state"})
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RoundRef:
    """Which parked call a state names: its id, the step it was minted for, and the replica holding it."""

    round_id: str
    step: int
    replica: str


@dataclass(frozen=True, slots=True)
class Passed:
    """A 2026 backend's own `requestState`, sealed for its client: the backend's name and the state, as it made it."""

    backend: str
    state: Any


class UnknownTask(InvalidParams):
    """A task handle that is not this caller's: forged, altered, another principal's or tenant's."""

    def __init__(self, reason: str) -> None:
        super().__init__(UNKNOWN_TASK)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class TaskRef:
    """What a task handle names: the backend that made the task, and its own taskId; for a 2025-11-25 task, the
    flags of the backend session that made it too (`session`: tasks live in that session; None: a 2026 task)."""

    backend: str
    task_id: str
    session: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class Binding:
    """What a state is bound to: the caller and the request it answers (the retry must repeat both)."""

    principal: Principal
    method: str
    target: str
    arguments: str  # digest

    @classmethod
    def of(cls, principal: Principal, method: str, params: Mapping[str, Any]) -> Binding:
        target_key = "uri" if method == spec.RESOURCES_READ else "name"
        target, arguments = params.get(target_key), params.get("arguments")
        canonical = orjson.dumps(arguments if arguments is not None else {}, option=orjson.OPT_SORT_KEYS)
        return cls(principal, method, str(target), _b64(hashlib.sha256(canonical).digest()[:16]))


class StateSeal:
    """Seals and opens states with an HMAC key ring: the first key seals, every key opens."""

    def __init__(self, keys: Sequence[bytes], ttl_seconds: float) -> None:
        if not keys:
            raise ValueError("a StateSeal needs a key")
        self.keys = list(keys)
        self.ttl_seconds = ttl_seconds

    def prefer(self, key: bytes) -> None:
        """Seal with `key` from now on; the keys used so far still open what they sealed."""
        if self.keys[0] != key:
            self.keys = [key, *(known for known in self.keys if known != key)][:MAX_KEYS]

    def seal(self, ref: RoundRef | Passed, binding: Binding, *, now: float | None = None) -> str:
        key = self.keys[0]
        named = ({"b": ref.backend, "s": ref.state} if isinstance(ref, Passed)
                 else {"r": ref.round_id, "n": ref.step, "k": ref.replica})
        claims = {**named, "p": _principal(key, binding.principal),
                  "m": binding.method, "t": binding.target, "a": binding.arguments,
                  "e": math.ceil((time.time() if now is None else now) + self.ttl_seconds)}
        signed = f"{VERSION}.{_b64(orjson.dumps(claims))}"
        return f"{signed}.{_b64(_tag(key, signed))}"

    def open(self, token: Any, binding: Binding, *, now: float | None = None) -> RoundRef | Passed:
        """The round (or backend state) a state names, once its tag, expiry and binding are checked;
        InvalidState otherwise."""
        if not isinstance(token, str) or len(token) > MAX_STATE_CHARS:
            raise InvalidState("not a string, or too long")
        signed, _, tag = token.rpartition(".")
        key = self._key_for(signed, tag)
        try:
            claims = orjson.loads(_unb64(signed.partition(".")[2]))
            ref: RoundRef | Passed = (Passed(claims["b"], claims["s"]) if "b" in claims
                                      else RoundRef(claims["r"], claims["n"], claims["k"]))
            expires = claims["e"]
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidState("malformed") from exc
        if not isinstance(expires, int) or (time.time() if now is None else now) >= expires:
            raise InvalidState("expired")
        if claims.get("p") != _principal(key, binding.principal):
            raise InvalidState("another principal")
        if (claims.get("m"), claims.get("t"), claims.get("a")) != (binding.method, binding.target, binding.arguments):
            raise InvalidState("another request (method, name or arguments)")
        return ref

    def seal_task(self, ref: TaskRef, principal: Principal) -> str:
        """A task handle for `principal`: the backend and its taskId, bound to the tenant and the principal."""
        key = self.keys[0]
        claims = {"b": ref.backend, "i": ref.task_id, "n": principal[0], "p": _principal(key, principal)}
        if ref.session is not None:
            claims["s"] = sorted(ref.session)
        signed = f"{TASK_VERSION}.{_b64(orjson.dumps(claims))}"
        return f"{signed}.{_b64(_tag(key, signed))}"

    def open_task(self, handle: Any, principal: Principal) -> TaskRef:
        """The task a handle names, once its tag and its tenant and principal are checked; UnknownTask otherwise."""
        if not isinstance(handle, str) or len(handle) > MAX_STATE_CHARS:
            raise UnknownTask("not a string, or too long")
        signed, _, tag = handle.rpartition(".")
        try:
            key = self._key_for(signed, tag, TASK_VERSION)
            claims = orjson.loads(_unb64(signed.partition(".")[2]))
            session = claims.get("s")
            ref = TaskRef(claims["b"], claims["i"], None if session is None else frozenset(session))
        except InvalidState as exc:
            raise UnknownTask(exc.reason) from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise UnknownTask("malformed") from exc
        if claims.get("n") != principal[0] or claims.get("p") != _principal(key, principal):
            raise UnknownTask("another tenant or principal")
        return ref

    def _key_for(self, signed: str, tag: str, version: str = VERSION) -> bytes:
        """The key whose tag this is (compared in constant time); InvalidState when none is."""
        if not signed.startswith(f"{version}."):
            raise InvalidState("unknown format")
        try:
            given = _unb64(tag)
        except ValueError as exc:
            raise InvalidState("malformed tag") from exc
        for key in self.keys:
            if hmac.compare_digest(given, _tag(key, signed)):
                return key
        raise InvalidState("bad tag (altered, or sealed with another key)")


def _tag(key: bytes, signed: str) -> bytes:
    return hmac.new(key, signed.encode(), hashlib.sha256).digest()


def _principal(key: bytes, principal: Principal) -> str:
    """Keyed, so the readable payload does not give away the subject (an email, say) to a dictionary."""
    tenant, subject = principal
    digest = hmac.new(key, b"principal\0" + _utf8(tenant) + b"\0" + _utf8(subject), hashlib.sha256)
    return _b64(digest.digest()[:16])


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a token's claims may hold lone surrogates


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise ValueError("not base64url") from exc
