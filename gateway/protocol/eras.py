"""The two protocol eras on one endpoint, and what a 2026-07-28 request must carry. Pure.

Handshake era (2025-03-26 … 2025-11-25): `initialize` opens a session that fixes the version
and the client's capabilities. 2026-07-28: no handshake and no session; every request carries
its version and the client's capabilities in `params._meta` (the envelope), repeats its routing
facts as headers, and is answered on its own (../shared/PROTOCOL-2026.md §A).

A request's era is decided header first (§A.5): an `MCP-Protocol-Version` that is not a
handshake version means 2026 (an unknown one too, so it is told which versions are served).
The 2026 checks run in the official SDK's order (§A.4): envelope keys present (-32602), headers
agree with the body (-32020), version served (-32022); `envelope_of` is that ladder.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson
from multidict import MultiMapping

from gateway.protocol import spec
from gateway.protocol.errors import HeaderMismatch, InvalidParams, UnsupportedProtocolVersion
from gateway.protocol.routing_headers import METHOD_KEY, NAME_KEY, VERSION_KEY, header_value
from gateway.protocol.spec import CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, LOG_LEVEL_KEY, PROTOCOL_VERSION_KEY

JsonObject = dict[str, Any]

HANDSHAKE_VERSIONS = frozenset(spec.SUPPORTED_VERSIONS)
SERVED_VERSIONS = (*spec.SUPPORTED_VERSIONS, *spec.MODERN_VERSIONS)
"""Every version the gateway serves, in discover's `supportedVersions` and -32022's `data.supported`."""

REMOVED_METHODS = frozenset({spec.INITIALIZE, spec.PING, spec.LOGGING_SET_LEVEL, spec.RESOURCES_SUBSCRIBE,
                             spec.RESOURCES_UNSUBSCRIBE})
"""Handshake-era methods 2026-07-28 removed: unknown methods there (404, -32601)."""

NAME_BEARING = {spec.TOOLS_CALL: "name", spec.PROMPTS_GET: "name", spec.RESOURCES_READ: "uri",
                spec.TASKS_GET: "taskId", spec.TASKS_UPDATE: "taskId", spec.TASKS_CANCEL: "taskId"}
"""Methods whose `Mcp-Name` header repeats this param (the tasks extension's: its taskId)."""

CACHEABLE = frozenset({spec.SERVER_DISCOVER, spec.TOOLS_LIST, spec.PROMPTS_LIST, spec.RESOURCES_LIST,
                       spec.RESOURCES_TEMPLATES_LIST, spec.RESOURCES_READ})
"""Results that must say how long they may be cached (`ttlMs`, `cacheScope`)."""

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""Syslog severities, least severe first."""

CONNECTION_KEYS = (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, LOG_LEVEL_KEY)
"""`_meta` keys that describe the client's own connection: a backend hears from the gateway, not from it."""
_ABSENT = object()

_HTTP_STATUS = {spec.PARSE_ERROR: 400, spec.INVALID_REQUEST: 400, spec.INVALID_PARAMS: 400,
                spec.HEADER_MISMATCH: 400, spec.MISSING_CLIENT_CAPABILITY: 400,
                spec.UNSUPPORTED_PROTOCOL_VERSION: 400, spec.METHOD_NOT_FOUND: 404}


def is_modern(version_header: str | None) -> bool:
    """Whether a request's `MCP-Protocol-Version` header puts it in the 2026 era."""
    return version_header is not None and version_header not in HANDSHAKE_VERSIONS


def claims_modern(body: Any) -> bool:
    """Whether a decoded body names a 2026 version in its envelope (without the header: -32020)."""
    params = body.get("params") if isinstance(body, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None
    return isinstance(version, str) and version not in HANDSHAKE_VERSIONS


def envelope_of(body: Any) -> Envelope | None:
    """What a 2026 body's envelope names, read without checking or taking it (for the audit record of a request
    refused before its envelope was taken); None for a handshake-era body."""
    if not claims_modern(body):
        return None
    meta = body["params"]["_meta"]
    return _envelope((meta[PROTOCOL_VERSION_KEY], {}, meta.get(CLIENT_INFO_KEY), None))


def http_status(code: int) -> int:
    """A 2026 JSON reply's HTTP status: client errors 400 (unknown method 404), anything else 200."""
    return _HTTP_STATUS.get(code, 200)


def unsupported(version: str) -> UnsupportedProtocolVersion:
    return UnsupportedProtocolVersion(version[:40], list(SERVED_VERSIONS))


class Envelope(NamedTuple):
    """What one 2026 request says about its client; nothing is remembered from earlier requests."""

    protocol_version: str
    client_capabilities: JsonObject
    client_info: Any = None
    log_level: str | None = None

    def logs(self, level: Any) -> bool:
        """Whether a `notifications/message` at `level` goes to this request (never without a logLevel)."""
        if self.log_level is None or level not in LOG_LEVELS:
            return False
        return LOG_LEVELS.index(level) >= LOG_LEVELS.index(self.log_level)


_envelope = functools.partial(tuple.__new__, Envelope)
"""An Envelope from its fields' tuple, made in C: NamedTuple's own `__new__` is a Python call (every 2026 request
makes one)."""


def take_envelope(method: str, params: JsonObject | None, headers: MultiMapping[str] | None) -> Envelope:
    """A 2026 request's envelope, checked against its routing headers in the SDK's order (or the error it
    gets), and taken out of its `_meta`: what is left there is what a backend may hear (the gateway
    speaks for itself upstream), and a `_meta` of the envelope alone goes.

    `headers` None: a transport without headers (stdio), where the header rung has nothing to check.
    Every 2026 request runs this: it is written for the interpreter (few steps in the usual case).
    """
    meta = params.get("_meta") if params else None
    if not isinstance(meta, dict):
        raise InvalidParams(f"Invalid params: params._meta must carry {PROTOCOL_VERSION_KEY} and "
                            f"{CLIENT_CAPABILITIES_KEY}")
    version = meta.pop(PROTOCOL_VERSION_KEY, _ABSENT)
    capabilities = meta.pop(CLIENT_CAPABILITIES_KEY, _ABSENT)
    if version is _ABSENT or capabilities is _ABSENT:
        missing = [key for key, value in ((PROTOCOL_VERSION_KEY, version), (CLIENT_CAPABILITIES_KEY, capabilities))
                   if value is _ABSENT]
        raise InvalidParams(f"Invalid params: params._meta lacks {', '.join(missing)}")
    if headers is not None:  # each header once and exactly the body's value: no more to check (else say why)
        name_key = NAME_BEARING.get(method)
        if (headers.getall(VERSION_KEY, ()) != [version] or headers.getall(METHOD_KEY, ()) != [method]
                or headers.getall(NAME_KEY, ()) != ([params[name_key]] if name_key in params else [])):  # type: ignore[index, operator]
            _check_headers(method, params, version, headers)  # type: ignore[arg-type]  # params holds `_meta`
    if version not in spec.MODERN_VERSIONS:
        if not isinstance(version, str):
            raise InvalidParams(f"Invalid params: {PROTOCOL_VERSION_KEY} must be a string")
        raise unsupported(version)
    if not isinstance(capabilities, dict):
        raise InvalidParams(f"Invalid params: {CLIENT_CAPABILITIES_KEY} must be an object")
    info, level = meta.pop(CLIENT_INFO_KEY, None), meta.pop(LOG_LEVEL_KEY, None)
    if level is not None and level not in LOG_LEVELS:
        raise InvalidParams(f"Invalid params: {LOG_LEVEL_KEY} must be one of {', '.join(LOG_LEVELS)}")
    if not meta:
        del params["_meta"]  # type: ignore[index]
    return _envelope((version, capabilities, info, level))


def _check_headers(method: str, params: JsonObject, version: Any, headers: MultiMapping[str]) -> None:
    """The headers must repeat the body, each once (first-copy and last-copy readers would disagree): the
    version, the method, and the name of tools/call, prompts/get, resources/read (and a task's id), which
    may come trimmed or in its base64 form."""
    versions, methods, names = (headers.getall(VERSION_KEY, ()), headers.getall(METHOD_KEY, ()),
                                headers.getall(NAME_KEY, ()))
    if len(versions) > 1 or len(methods) > 1 or len(names) > 1:  # one test for the three: every 2026 call runs it
        repeated = next(key for key in (VERSION_KEY, METHOD_KEY, NAME_KEY) if len(headers.getall(key, ())) > 1)
        raise HeaderMismatch(f"Header mismatch: {repeated} appears more than once")
    if (versions[0] if versions else None) != version:
        raise HeaderMismatch(f"Header mismatch: {spec.VERSION_HEADER} differs from the body's protocol version")
    if (methods[0] if methods else None) != method:
        raise HeaderMismatch(f"Header mismatch: {spec.METHOD_HEADER} differs from the body's method")
    name_key = NAME_BEARING.get(method)
    body_name = params.get(name_key) if name_key else None
    if body_name is None:
        return
    raw = names[0] if names else None
    if raw != body_name and header_value(raw) != body_name:  # decoded only when it is not the plain value
        raise HeaderMismatch(f"Header mismatch: {spec.NAME_HEADER} differs from the body's {name_key}")


def missing_capabilities(required: Mapping[str, Any], declared: Mapping[str, Any]) -> JsonObject:
    """The part of `required` (client capabilities, e.g. `{"elicitation": {"form": {}}}`) not in `declared`."""
    missing: JsonObject = {}
    for name, needed in required.items():
        have = declared.get(name)
        if have is None:
            missing[name] = needed
        elif isinstance(needed, dict) and isinstance(have, dict) and (
                lacking := {key: value for key, value in needed.items() if key not in have}):
            missing[name] = lacking
    return missing


# ---------------------------------------------------------------- results


def stateless_capabilities(capabilities: Mapping[str, Any], *, listen: bool = False) -> JsonObject:
    """Handshake capabilities as a 2026 discover states them.

    Change notifications and resource subscriptions reach a 2026 client only on a
    `subscriptions/listen` stream: without `listen` served they are promised false. Tasks are
    an extension at 2026-07-28, not a capability.
    """
    out: JsonObject = {}
    for name, value in capabilities.items():
        if name == "tasks":
            continue
        if not listen and isinstance(value, dict) and name in ("tools", "prompts", "resources"):
            value = {**value, "listChanged": False}
            if "subscribe" in value:
                value["subscribe"] = False
        out[name] = value
    return out


PASSED_RESULT_TYPES = frozenset({"input_required", "task"})
"""A 2026 backend's result types the gateway passes on as they are (MRTR, the tasks extension)."""


def completed(result: JsonObject, server_info: Any, *, in_place: bool = False) -> JsonObject:
    """A result as 2026 sends it: `resultType` complete, who answered merged into its own `_meta`.

    A copy, unless `in_place` (the result is this request's alone, e.g. a backend's decoded reply).
    `server_info` may be pre-encoded (an `orjson.Fragment`).
    """
    meta = result.get("_meta")
    done = result if in_place else dict(result)
    if done.get("resultType") not in PASSED_RESULT_TYPES:  # a 2026 backend's, passed through
        done["resultType"] = "complete"
    done["_meta"] = {**meta, spec.SERVER_INFO_KEY: server_info} if isinstance(meta, dict) else {
        spec.SERVER_INFO_KEY: server_info}
    return done


def completion_tail(server_info: Any) -> bytes:
    """What `completed` adds to a result without `resultType` or `_meta`, as bytes that end its encoded `{…}`
    (after a comma: not for an empty result)."""
    return b"," + orjson.dumps({"resultType": "complete", "_meta": {spec.SERVER_INFO_KEY: server_info}})[1:]


def page_tail(server_info: Any, ttl_ms: int, scope: str) -> bytes:
    """What turns a gateway-built list page (`{…}`, no `_meta` of its own) into its 2026 form, as bytes."""
    tail = {"ttlMs": ttl_ms, "cacheScope": scope, "resultType": "complete",
            "_meta": {spec.SERVER_INFO_KEY: server_info}}
    return b"," + orjson.dumps(tail)[1:]
