"""One audit record: what it holds, the arguments' digest, and their redaction. Pure functions.

A record is built in the trail's writer task, never on the request path: the dispatcher hands over
what it read of the request's context (`Seen`), its message and reply (`Handed`), and `RecordMaker.call`
reads them afterwards.
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
from gateway.tracing.context import trace_id

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


class Seen(NamedTuple):
    """The parts of a request's context a record reads, taken when the reply is made: holding the context
    itself until the writer runs kept its whole graph (channel, request, tenant) alive that much longer."""

    principal: Any
    request_id: str
    traceparent: str | None
    envelope: Any
    protocol_version: str
    target: str | None
    backend: str | None
    outcome: str
    extra: dict[str, Any]


def seen(ctx: Any) -> Seen:
    return Seen(ctx.principal, ctx.request_id, ctx.traceparent, ctx.envelope, ctx.protocol_version, ctx.target,
                ctx.backend, ctx.outcome, ctx.extra)


class Handed(NamedTuple):
    """What the dispatcher hands over for one request: cheap to make, read later by the writer."""

    time: float  # wall clock at the end of the request
    seconds: float
    method: str
    request: Any  # the JSON-RPC request object
    ctx: Seen  # what the record reads of the request's context
    reply: Any  # the JSON-RPC reply object


def canonical(value: Any) -> bytes:
    """Canonical JSON: sorted keys, no whitespace, UTF-8."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def digest(value: Any) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()


def timestamp(seconds: float) -> str:
    """RFC 3339 in UTC, to the millisecond (the part up to the second is made once a second: formatting
    a datetime cost more than the rest of a record)."""
    whole = int(seconds)
    if whole != _second[0]:
        _second[:] = whole, datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{_second[1]}.{int((seconds - whole) * 1000):03d}Z"


_second: list[Any] = [None, ""]


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


class RecordMaker:
    """Builds records as the config asks: the arguments' digest always, the arguments themselves when
    `arguments: redacted` (masked by the configured key globs and pointers)."""

    def __init__(self, *, arguments: str, redact_keys: Iterable[str], redact_pointers: Iterable[str]) -> None:
        self.redact = Redactor(redact_keys, redact_pointers) if arguments == "redacted" else None

    def call(self, handed: Handed) -> dict[str, Any]:
        ctx, method = handed.ctx, handed.method
        params = handed.request.get("params") if isinstance(handed.request, dict) else None
        arguments = arguments_of(method, params)
        error = error_of(handed.reply)
        # One literal, its keys (and those of the dicts in it) in canonical order, so that sealing it needs no
        # sort; the chain's fields are filled in where they stand. The writer makes one of these per call.
        record = {
            "arguments_sha256": None if arguments is None else digest(arguments), "backend": ctx.backend,
            "bytes_in": size(handed.request), "bytes_out": size(handed.reply), "chain": None,
            "client": _client(ctx.envelope), "duration_ms": round(handed.seconds * 1000, 3),
            "era": "session" if ctx.envelope is None else "stateless", "error": error, "kind": "request",
            "method": method, "name": name_of(method, params), "original": ctx.target,
            "outcome": "error" if error is not None and ctx.outcome == "ok" else ctx.outcome,
            "policy": _policy(ctx.extra) if ctx.extra else None, "prev": None,
            "protocol_version": ctx.protocol_version, "request_id": ctx.request_id, "seq": None,
            "subject": ctx.principal.subject, "tenant": ctx.principal.tenant, "time": timestamp(handed.time),
            "trace_id": trace_id(ctx.traceparent), "v": VERSION}
        if self.redact is not None and arguments is not None:
            record["arguments"] = self.redact(arguments)  # out of order: this record is sorted when sealed
        return record


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


def _client(envelope: Any) -> dict[str, Any] | None:
    """A 2026 request's clientInfo name and version (a session's client is not kept)."""
    info = envelope.client_info if envelope is not None else None
    if not isinstance(info, dict):
        return None
    return {key: str(info[key])[:MAX_NAME_CHARS] for key in ("name", "version") if key in info}


def _policy(extra: dict[str, Any]) -> dict[str, Any] | None:
    """The policy decision the dispatcher took, when it took one (the rule that refused, and why)."""
    if "rule" not in extra and "denied" not in extra:
        return None
    return {"denied": extra.get("denied"), "rule": extra.get("rule")}
