"""Speaking 2026-07-28 to a backend: the gateway's envelope, routing headers, and what comes back.

A 2026 backend has no handshake and no session: every request carries the gateway's own
envelope in `params._meta` (version, the capabilities the gateway relays for the client served,
its clientInfo), and over HTTP repeats its routing facts as headers (`Mcp-Method`, `Mcp-Name`,
`Mcp-Param-*` for arguments the tool's schema annotates). The client's own envelope keys never
reach a backend (the forwarder removes them; here they are dropped again, as defence).

What comes back is made to look like a handshake-era reply, so the layers above need not know
the backend's era: `resultType` and the backend's serverInfo go; the list results' cache hints
(`ttlMs`) are kept per method in `ttl_ms` (the catalogue's refresh honours them) and removed.
A `resultType: "task"` reply to a tools/call is passed on only when the request declared the tasks
extension (the client's own declaration, forwarded: `capabilities.TASKS`); to any other it is refused,
as the backend broke the protocol and no client may get a task it did not ask for. The tasks
extension's own replies (tasks/get, …) are passed on as they are: a task's `ttlMs` is its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, Final

from gateway.protocol import spec
from gateway.protocol.capabilities import for_backend
from gateway.protocol.eras import CONNECTION_KEYS, NAME_BEARING
from gateway.protocol.routing_headers import HeaderParams, header_form, header_params, param_headers
from gateway.upstream.base import JsonObject

MODERN_VERSION: Final = spec.MODERN_VERSIONS[-1]
"""The version the gateway speaks to 2026 backends."""
INPUT_REQUIRED: Final = "input_required"
TASK: Final = "task"
LISTS = frozenset({spec.TOOLS_LIST, spec.PROMPTS_LIST, spec.RESOURCES_LIST, spec.RESOURCES_TEMPLATES_LIST})
_RESULT_ONLY = ("resultType", "ttlMs", "cacheScope")
"""2026 result fields a handshake-era reply does not have."""
LOCAL_AT_2026: Final = frozenset({spec.LOGGING_SET_LEVEL})
"""Removed at 2026, answered by the gateway: each 2026 request says its own log level."""
WATCHED: Final = frozenset({spec.RESOURCES_SUBSCRIBE, spec.RESOURCES_UNSUBSCRIBE})
"""Removed at 2026, answered by the gateway: the URIs go in its listen stream's resourceSubscriptions."""


class Ending(Enum):
    """How one listen stream to a 2026 backend ended (over HTTP or a child's pipes)."""

    BROKE = "broke"  # dropped, or the backend ended it: listen again
    REFUSED = "refused"  # the backend serves no listen: ask no more


def promised(capabilities: JsonObject) -> JsonObject:
    """The listen filter a backend's discover capabilities promise ({}: nothing to listen for)."""
    return {flag: True for flag, (kind, _) in spec.LISTEN_FLAGS.items()
            if isinstance(capabilities.get(kind), dict) and capabilities[kind].get("listChanged") is True}


def honoured(ack: JsonObject) -> list[str]:
    """The list-change notifications a listen stream's acknowledgement says it will send."""
    flags = ack["params"].get("notifications")
    return [method for flag, (_, method) in spec.LISTEN_FLAGS.items() if isinstance(flags, dict) and flags.get(flag)]


class ModernWire:
    """One 2026 backend's wire details: what requests carry, what replies lose, what was learned."""

    def __init__(self, client_info: Mapping[str, Any]) -> None:
        self._client_info = dict(client_info)
        self._params: dict[str, HeaderParams] = {}  # tool name -> its annotated arguments
        self._declared: dict[frozenset[str], JsonObject] = {}  # relayable flags -> their capabilities
        self.ttl_ms: dict[str, int] = {}
        """The backend's latest cache hint per list method (0: do not keep)."""

    def envelope(self, params: JsonObject | None, flags: frozenset[str], *, logs: bool) -> JsonObject:
        """`params` with the gateway's envelope; `logs`: ask for log messages (someone listens)."""
        params = dict(params) if params else {}
        meta = params.get("_meta")
        if not isinstance(meta, dict):
            meta = {}
        elif meta.keys().isdisjoint(CONNECTION_KEYS):  # the usual one (the trace context): copied whole
            meta = dict(meta)
        else:
            meta = {k: v for k, v in meta.items() if k not in CONNECTION_KEYS}
        meta[spec.PROTOCOL_VERSION_KEY] = MODERN_VERSION
        declared = self._declared.get(flags)
        if declared is None:  # a handful of flag sets: made once each, shared read-only
            declared = self._declared[flags] = for_backend(flags)
        meta[spec.CLIENT_CAPABILITIES_KEY] = declared
        meta[spec.CLIENT_INFO_KEY] = self._client_info
        if logs:  # the client's own level filters them (client_logs): the backend sends all
            meta[spec.LOG_LEVEL_KEY] = "debug"
        params["_meta"] = meta
        return params

    def headers(self, method: str, params: JsonObject) -> dict[str, str]:
        """The routing headers of one request (the version header comes with the session)."""
        headers = {spec.METHOD_HEADER: method}
        key = NAME_BEARING.get(method)  # the param its `Mcp-Name` header repeats
        name = params.get(key) if key else None
        if isinstance(name, str):
            headers[spec.NAME_HEADER] = header_form(name)
            arguments = params.get("arguments")
            annotated = self._params.get(name) if method == spec.TOOLS_CALL else None
            if annotated and isinstance(arguments, dict):
                headers.update(param_headers(annotated, arguments))
        return headers

    def received(self, method: str, reply: JsonObject, *, tasks: bool = False) -> JsonObject:
        """The reply as a handshake-era backend would give it (see the module docstring); `tasks`: the
        request declared the tasks extension."""
        result = reply.get("result")
        if not isinstance(result, dict):
            return reply
        if result.get("resultType") == INPUT_REQUIRED:
            return reply  # passed through to a 2026 client (input_rounds.settle), as the backend made it
        if result.get("resultType") == TASK:
            if tasks and method == spec.TOOLS_CALL:
                return reply  # its taskId becomes the gateway's handle (dispatch.forward)
            error = {"code": spec.INTERNAL_ERROR, "message": "Backend returned a task the gateway did not ask for"}
            return {"jsonrpc": "2.0", "id": reply.get("id"), "error": error}
        if method in spec.TASK_METHODS:
            return reply
        if method in LISTS:
            self._learn(method, result)
        reply["result"] = plain(result)  # the reply was decoded for this request alone
        return reply

    @property
    def list_ttl_ms(self) -> int | None:
        """How long the backend's lists stay fresh: the shortest hint of its latest lists (None: none seen)."""
        return min(self.ttl_ms.values()) if self.ttl_ms else None

    def _learn(self, method: str, result: JsonObject) -> None:
        ttl = result.get("ttlMs")
        self.ttl_ms[method] = ttl if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0 else 0
        if method == spec.TOOLS_LIST and isinstance(result.get("tools"), list):
            for tool in result["tools"]:
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    annotated = header_params(tool.get("inputSchema"))
                    if annotated:
                        self._params[tool["name"]] = annotated


def plain(result: JsonObject) -> JsonObject:
    """A 2026 result without its 2026-only fields and without the backend's serverInfo."""
    plain = {k: v for k, v in result.items() if k not in _RESULT_ONLY}
    meta = plain.get("_meta")
    if isinstance(meta, dict) and spec.SERVER_INFO_KEY in meta:
        rest = {k: v for k, v in meta.items() if k != spec.SERVER_INFO_KEY}
        if rest:
            plain["_meta"] = rest
        else:
            del plain["_meta"]
    return plain


def discovered(reply: JsonObject) -> JsonObject | None:
    """The capabilities of a `server/discover` reply that offers our version, else None (not modern)."""
    result = reply.get("result")
    if not isinstance(result, dict):
        return None
    versions = result.get("supportedVersions")
    if not isinstance(versions, list) or MODERN_VERSION not in versions:
        return None
    capabilities = result.get("capabilities")
    return capabilities if isinstance(capabilities, dict) else {}


def is_input_required(reply: JsonObject) -> bool:
    result = reply.get("result")
    return isinstance(result, dict) and result.get("resultType") == INPUT_REQUIRED
