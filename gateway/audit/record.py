"""One audit record: what it holds, the arguments' digest, and their redaction. Pure functions.

The request path hands over an `Entry`: a plain tuple of what it already holds (made in C, no dict, no
formatting); `RecordMaker.call` turns it into the record in the trail's writer task, once per record,
in one dict literal whose keys are in canonical order (so sealing it needs no sort).
Arguments are digested as SHA-256 over their canonical JSON: keys sorted, no whitespace, UTF-8, as
orjson writes (the same arguments always give the same digest, whatever order a client sent).
A token never reaches a record: only `params.arguments` (or a completion's `argument`) is read,
never `params.token` or `_meta`, and redaction masks secret-looking keys and token-shaped values.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any, NamedTuple

import orjson

from gateway.protocol import spec

VERSION = 1
"""The record format; a reader refuses records of a later one."""
REDACTED = "[redacted]"
MAX_NAME_CHARS = 512
"""A client-chosen name or URI is clipped in the record (the digest covers the arguments in full)."""
AUDITED_METHODS = frozenset({spec.TOOLS_CALL, spec.PROMPTS_GET, spec.RESOURCES_READ, spec.COMPLETION_COMPLETE,
                             spec.RESOURCES_SUBSCRIBE, spec.RESOURCES_UNSUBSCRIBE, spec.SUBSCRIPTIONS_LISTEN})
"""The requests that get a record: what a caller did with a backend's tools, prompts and resources."""
_TOKEN_SHAPED = re.compile(r"^(?:bearer\s+)?(?:eyJ[\w-]+\.[\w-]+\.[\w-]*|mcpgw_\w{16,}|sk-[\w-]{16,})$", re.I)
"""A JWT, or a key with a well-known prefix: masked wherever it appears, whatever its key is called."""


class Entry(NamedTuple):
    """What the request path hands over for one request: what it holds already, read later by the writer. The
    trail makes a plain tuple of these fields in this order (a NamedTuple's own `__new__` is a Python call), and
    never holds the request's context (its graph, channel and request included, would live as long as the entry
    waits)."""

    time: float  # wall clock at the end of the request
    seconds: float | None  # None: refused before it was run (no duration)
    method: str
    request: Any  # the JSON-RPC request object
    reply: Any  # the JSON-RPC reply object (a refusal's error reply)
    principal: Any
    request_id: str
    traceparent: str | None
    client: Any  # a session's clientInfo as recorded (`client_of`); None for a 2026 request (its envelope has it)
    envelope: Any  # a 2026 request's envelope; None: a session's (handshake era)
    protocol_version: str
    target: str | None
    backend: str | None
    outcome: str
    extra: dict[str, Any] | None  # the policy decision (`rule`, `denied`), when one was taken
    size: int  # the request's bytes as they came (0: unknown, as for a batch member: measured by encoding it)


def canonical(value: Any) -> bytes:
    """Canonical JSON: sorted keys, no whitespace, UTF-8."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def digest(value: Any) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()


def timestamp(seconds: float) -> str:
    """RFC 3339 in UTC, to the millisecond (the part up to the second is made once a second, the millisecond
    looked up: formatting a datetime, or even an f-string's `:03d`, cost more than the rest of a record)."""
    whole = int(seconds)
    if whole != _second[0]:
        _second[:] = whole, datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return _second[1] + _MILLIS[int((seconds - whole) * 1000)]


_second: list[Any] = [None, ""]
_MILLIS = tuple(f".{n:03d}Z" for n in range(1000))


class Redactor:
    """Masks arguments by key-name globs (any depth, any case) and JSON pointers; token-shaped strings too."""

    def __init__(self, key_globs: Iterable[str], pointers: Iterable[str]) -> None:
        self.globs = tuple(glob.lower() for glob in key_globs)
        self.pointers = tuple(_pointer_parts(p) for p in pointers)

    def __call__(self, arguments: Any) -> Any:
        masked = self._walk(arguments)
        for parts in self.pointers:
            masked = _mask_at(masked, parts)
        return masked

    def _walk(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: REDACTED if self._secret_key(k) else self._walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, str) and _TOKEN_SHAPED.match(value):
            return REDACTED
        return value

    def _secret_key(self, key: str) -> bool:
        lowered = key.lower()
        return any(fnmatchcase(lowered, glob) for glob in self.globs)


def _pointer_parts(pointer: str) -> tuple[str, ...]:
    """RFC 6901: `/a/b~1c` names a → "b/c"; "" is the whole document."""
    return tuple(part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:])


def _mask_at(value: Any, parts: tuple[str, ...]) -> Any:
    """`value` with what `parts` points at masked (the walk made copies: changing them is safe)."""
    if not parts:
        return REDACTED
    head, rest = parts[0], parts[1:]
    if isinstance(value, dict) and head in value:
        value[head] = _mask_at(value[head], rest)
    elif isinstance(value, list) and head.isdigit() and int(head) < len(value):
        value[int(head)] = _mask_at(value[int(head)], rest)
    return value


def arguments_of(method: str, params: Any) -> Any:
    """What a caller sent a backend's item: a tool's or prompt's arguments, a completion's argument; None for
    methods without any (reads, subscriptions)."""
    if not isinstance(params, dict):
        return None
    if method in (spec.TOOLS_CALL, spec.PROMPTS_GET):
        arguments = params.get("arguments")
        return {} if arguments is None else arguments
    if method == spec.COMPLETION_COMPLETE:
        return params.get("argument")
    return None


def name_of(method: str, params: Any) -> str | None:
    """The item as the client named it: a tool or prompt name, a resource URI, a completion's reference."""
    if not isinstance(params, dict):
        return None
    found = params.get("uri") if method in _URI_METHODS else params.get("name")
    if method == spec.COMPLETION_COMPLETE and isinstance(params.get("ref"), dict):
        found = params["ref"].get("name") or params["ref"].get("uri")
    return found[:MAX_NAME_CHARS] if isinstance(found, str) else None


_URI_METHODS = frozenset({spec.RESOURCES_READ, spec.RESOURCES_SUBSCRIBE, spec.RESOURCES_UNSUBSCRIBE})


def error_of(reply: Any) -> dict[str, Any] | None:
    """A JSON-RPC error's code and reason (`data.reason`): never its message, which may quote arguments."""
    error = reply.get("error") if isinstance(reply, dict) else None
    if not isinstance(error, dict):
        return None
    data = error.get("data")
    reason = data.get("reason") if isinstance(data, dict) else None
    return {"code": error.get("code"), "reason": reason if isinstance(reason, str) else None}  # (sorted keys)


def size(message: Any) -> int:
    """A JSON-RPC message's size as the gateway encodes it (a result encoded already is copied, not re-encoded)."""
    try:
        return len(orjson.dumps(message))
    except orjson.JSONEncodeError:
        return 0


def client_of(info: Any) -> dict[str, str] | None:
    """The name and version of a clientInfo (initialize's, or a 2026 request's), clipped, as a record shows them:
    the same dict for the same two strings (a 2026 request names its client every time)."""
    if not isinstance(info, dict):
        return None
    name, version = info.get("name"), info.get("version")
    if type(name) is str and type(version) is str and (known := _CLIENTS.get((name, version))) is not None:
        return known
    made = {key: str(info[key])[:MAX_NAME_CHARS] for key in ("name", "version") if key in info}
    if type(name) is str and type(version) is str:
        if len(_CLIENTS) >= MAX_CLIENTS:
            _CLIENTS.clear()
        _CLIENTS[name, version] = made
    return made


_CLIENTS: dict[tuple[str, str], dict[str, str]] = {}
MAX_CLIENTS = 1024
"""Distinct client names and versions remembered (then forgotten all at once: clients choose them)."""


class RecordMaker:
    """Makes a call's record line as the config asks: the arguments' digest always, the arguments themselves when
    `arguments: redacted` (masked by the configured key globs and pointers), sealed into `chain`.

    `line` refills one dict, made once with every key in canonical order (a new dict per record cost as
    much as the rest of the record together; refilling one, a third of that), and seals it in place: the
    writer makes one per call, so this is written for the interpreter (few steps, no helper for what one
    expression says, the chain's fields set here, not in a call of its own)."""

    def __init__(self, *, arguments: str, redact_keys: Iterable[str], redact_pointers: Iterable[str],
                 chain: Any) -> None:
        self.redact = Redactor(redact_keys, redact_pointers) if arguments == "redacted" else None
        self.chain = chain  # audit.chain.Chain: the trail's
        self.record: dict[str, Any] = dict.fromkeys(REQUEST_KEYS)
        self.record.update(kind="request", v=VERSION, chain=chain.id)

    def line(self, e: Entry) -> bytes:
        """The sealed record of one entry (a plain tuple in Entry's order), one JSON line without its newline."""
        record = self.record
        (when, seconds, method, request, reply, principal, record["request_id"], traceparent, client, envelope,
         record["protocol_version"], record["original"], record["backend"], outcome, extra, size_in) = e
        params = request.get("params")
        if type(params) is not dict:
            params = _NO_PARAMS
        if method in _NAMED:
            arguments, name = params.get("arguments"), params.get("name")
            if arguments is None:
                arguments = _NO_ARGUMENTS
            record["arguments_sha256"] = _NO_ARGUMENTS_SHA256 if arguments is _NO_ARGUMENTS else _sha256(
                _dumps(arguments, None, _SORTED)).hexdigest()  # _digest(arguments), inline
        else:
            arguments, name = arguments_of(method, params), name_of(method, params)
            record["arguments_sha256"] = None if arguments is None else _digest(arguments)
        record["name"] = name if type(name) is str and len(name) <= MAX_NAME_CHARS else _clipped(name)
        record["error"] = error = error_of(reply) if "error" in reply else None
        record["outcome"] = "error" if error is not None and outcome == "ok" else outcome
        try:
            record["bytes_out"] = len(_dumps(reply))
        except orjson.JSONEncodeError:
            record["bytes_out"] = 0
        record["bytes_in"] = size_in or size(request)
        if envelope is None:
            record["client"], record["era"] = client, "session"
        else:
            record["client"], record["era"] = client_of(envelope.client_info), "stateless"
        # (seconds None: refused before it ran)
        record["duration_ms"] = int(seconds * 1_000_000) / 1000 if seconds is not None else None
        record["method"] = method
        record["policy"] = _policy(extra) if extra else None
        record["subject"], record["tenant"] = principal.subject, principal.tenant
        record["trace_id"] = traceparent[3:35] if traceparent else None
        whole = int(when)  # timestamp(when), inline
        if whole != _second[0]:
            timestamp(when)
        record["time"] = _second[1] + _MILLIS[int((when - whole) * 1000)]
        chain = self.chain
        if self.redact is not None and arguments is not None:
            return chain.seal({**record, "arguments": self.redact(arguments)})  # a copy, sorted when sealed
        record["seq"], record["prev"] = chain.seq, chain.prev
        chain.seq += 1
        return _dumps(record) if chain.mac is None else chain.macked(_dumps(record))


_NAMED = frozenset({spec.TOOLS_CALL, spec.PROMPTS_GET})
"""Methods whose arguments are `params.arguments` (an empty object when absent)."""
_NO_PARAMS: dict[str, Any] = {}
_NO_ARGUMENTS: dict[str, Any] = {}
_NO_ARGUMENTS_SHA256 = hashlib.sha256(b"{}").hexdigest()


REQUEST_KEYS = ("arguments_sha256", "backend", "bytes_in", "bytes_out", "chain", "client", "duration_ms", "era",
                "error",
                "kind", "method", "name", "original", "outcome", "policy", "prev", "protocol_version", "request_id",
                "seq", "subject", "tenant", "time", "trace_id", "v")
"""A call's record, its keys in canonical (sorted) order, the chain's (`chain`, `seq`, `prev`) among them."""


def _digest(arguments: Any) -> str:
    return _sha256(_dumps(arguments, None, _SORTED)).hexdigest()


_dumps, _SORTED = orjson.dumps, orjson.OPT_SORT_KEYS
_sha256 = hashlib.sha256  # OpenSSL's: on the CPU faster than CPython's own (valgrind counts its set-up more)


def _clipped(name: Any) -> str | None:
    return name[:MAX_NAME_CHARS] if isinstance(name, str) else None


def base(when: float, kind: str, tenant: str | None, subject: str | None, request_id: str | None) -> dict[str, Any]:
    """The fields every record starts with (the chain's come last, when it is sealed)."""
    return {"v": VERSION, "kind": kind, "time": timestamp(when), "request_id": request_id, "tenant": tenant,
            "subject": subject}


def admin_record(when: float, action: str, *, tenant: str | None, subject: str | None, request_id: str | None,
                 outcome: str, detail: dict[str, Any] | None = None) -> dict[str, Any]:
    """An admin action (reload, catalogue refresh): who asked (None for a signal), and how it ended."""
    record = base(when, "admin", tenant, subject, request_id)
    record.update(method=action, outcome=outcome, detail=detail or None)
    return record


def _policy(extra: dict[str, Any]) -> dict[str, Any] | None:
    """The policy decision the dispatcher took, when it took one (the rule that refused, and why)."""
    if "rule" not in extra and "denied" not in extra:
        return None
    return {"denied": extra.get("denied"), "rule": extra.get("rule")}
