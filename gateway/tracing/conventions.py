"""What the gateway's spans are named and carry: the OpenTelemetry MCP semantic conventions, and its own.

The MCP conventions (open-telemetry/semantic-conventions-genai, `docs/gen-ai/mcp.md`,
`model/mcp/spans.yaml`) name a span `{mcp.method.name} {target}`, the target being the tool or
prompt name when there is one of low cardinality (here: one the catalogue resolved), and set
`mcp.method.name`, `jsonrpc.request.id`, `gen_ai.tool.name`, `gen_ai.prompt.name`,
`mcp.resource.uri`, `gen_ai.operation.name` (`execute_tool` for tools/call only),
`mcp.protocol.version`, `mcp.session.id` (sessions only), `network.transport` (`tcp` for HTTP,
`pipe` for stdio), `server.address`/`server.port` on CLIENT spans, `client.address`/`client.port`
on SERVER spans, and on failure `error.type` (the JSON-RPC code, or `tool_error` for an `isError`
result) with `rpc.response.status_code`. A SERVER span counts every code as a failure except those
that say the caller asked for something that cannot be served (`CALLER_CODES`); a CLIENT span counts
them all.

The gateway's own attributes live under `mcpgw.` (GATEWAY_ATTRIBUTES documents each). No module
here imports OpenTelemetry: this is plain data, used by `spans.py` when tracing is on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson

from gateway.protocol import spec

METHOD = "mcp.method.name"
REQUEST_ID = "jsonrpc.request.id"
TOOL_NAME = "gen_ai.tool.name"
PROMPT_NAME = "gen_ai.prompt.name"
RESOURCE_URI = "mcp.resource.uri"
OPERATION = "gen_ai.operation.name"
PROTOCOL_VERSION = "mcp.protocol.version"
SESSION_ID = "mcp.session.id"
ERROR_TYPE = "error.type"
STATUS_CODE = "rpc.response.status_code"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
PROMPT_VARIABLE = "gen_ai.prompt.variable."
NETWORK_TRANSPORT = "network.transport"
NETWORK_PROTOCOL = "network.protocol.name"
NETWORK_PROTOCOL_VERSION = "network.protocol.version"
SERVER_ADDRESS, SERVER_PORT = "server.address", "server.port"
CLIENT_ADDRESS, CLIENT_PORT = "client.address", "client.port"
HTTP_STATUS = "http.response.status_code"

EXECUTE_TOOL = "execute_tool"
TOOL_ERROR = "tool_error"
TCP, PIPE = "tcp", "pipe"

CALLER_CODES = frozenset({spec.PARSE_ERROR, spec.INVALID_REQUEST, spec.METHOD_NOT_FOUND, spec.INVALID_PARAMS,
                          spec.RESOURCE_NOT_FOUND})
"""JSON-RPC codes a SERVER span does not count as its failure: the caller asked for what cannot be served."""

URI_METHODS = frozenset({spec.RESOURCES_READ, spec.RESOURCES_SUBSCRIBE, spec.RESOURCES_UNSUBSCRIBE})
NAMED_METHODS = {spec.TOOLS_CALL: TOOL_NAME, spec.PROMPTS_GET: PROMPT_NAME}
"""Methods whose `params.name` is the span's target, and the attribute it goes in."""

MAX_VALUE_CHARS = 256
"""A client-chosen value (tool name, URI, request id) is cut to this many characters on a span."""
MAX_CONTENT_CHARS = 8192
"""Captured arguments or results (opt-in) are cut to this many characters of JSON."""
REDACTED = "[redacted]"
SECRET_WORDS = ("password", "passwd", "secret", "token", "authorization", "api_key", "apikey", "cookie",
                "credential", "private_key")
"""A captured value under a key containing one of these (any case) is replaced by REDACTED."""

GATEWAY_ATTRIBUTES = {
    "mcpgw.tenant": "the caller's tenant",
    "mcpgw.subject": "the caller's subject (only with tracing.record_subject)",
    "mcpgw.request_id": "the request id of the gateway's log line (X-Request-Id)",
    "mcpgw.backend": "the backend that served the request",
    "mcpgw.tool.original": "the tool's (or prompt's) name at its backend, before namespacing",
    "mcpgw.policy.decision": "allowed: the item is in the tenant's view; not_visible: it is not (or does not exist)",
    "mcpgw.outcome": "how the request ended, as the log line and mcpgw_requests_total say",
    "mcpgw.catalogue.cache_hit": "whether the tenant's catalogue view came from the cache",
    "mcpgw.upstream.retries": "requests resent to the backend because the earlier attempt surely never left",
    "mcpgw.circuit.state": "the backend's circuit breaker when the call was made (closed, open, half_open)",
    "mcpgw.upstream.era": "handshake or 2026: how the gateway spoke to the backend",
    "mcpgw.round.step": "a multi-round trip's InputRequiredResults so far",
    "mcpgw.catalogue.items": "tools, prompts, resources and templates a refresh listed",
    "mcpgw.reload.outcome": "applied or rejected",
}
"""Every `mcpgw.*` attribute the gateway sets, and what it means (the docs list them from here)."""


class Peer(NamedTuple):
    """Where a request came from: `network.*` and `client.*` attributes of its SERVER span."""

    transport: str  # tcp | pipe
    address: str | None = None
    port: int | None = None
    protocol_version: str | None = None  # HTTP's ("1.1"); None for stdio

    def attributes(self) -> dict[str, Any]:
        attributes: dict[str, Any] = {NETWORK_TRANSPORT: self.transport}
        if self.protocol_version is not None:
            attributes[NETWORK_PROTOCOL], attributes[NETWORK_PROTOCOL_VERSION] = "http", self.protocol_version
        if self.address:
            attributes[CLIENT_ADDRESS] = self.address
            if self.port is not None:
                attributes[CLIENT_PORT] = self.port
        return attributes


def clipped(value: Any) -> str:
    text = value if type(value) is str else str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS]


def request_attributes(method: str, params: Any, request_id: Any) -> dict[str, Any]:
    """A request's own attributes (both span kinds): its method, id, and target."""
    attributes: dict[str, Any] = {METHOD: method}
    if request_id is not None:
        attributes[REQUEST_ID] = clipped(request_id)
    if type(params) is not dict:
        return attributes
    named = NAMED_METHODS.get(method)
    if named is not None and type(name := params.get("name")) is str:
        attributes[named] = clipped(name)
        if method == spec.TOOLS_CALL:
            attributes[OPERATION] = EXECUTE_TOOL
    elif method in URI_METHODS and type(uri := params.get("uri")) is str:
        attributes[RESOURCE_URI] = clipped(uri)
    return attributes


def span_name(method: str, target: str | None) -> str:
    return f"{method} {target}" if target else method


def target_of(method: str, params: Any) -> str | None:
    """The span name's target: the tool or prompt name (the caller decides whether it is low-cardinality)."""
    if method in NAMED_METHODS and type(params) is dict and type(name := params.get("name")) is str:
        return clipped(name)
    return None


def error_of(reply: Any) -> tuple[int, str] | None:
    """A JSON-RPC error reply's (code, message), or None."""
    if type(reply) is not dict or type(error := reply.get("error")) is not dict:
        return None
    code = error.get("code")
    return (code, str(error.get("message", ""))[:MAX_VALUE_CHARS]) if type(code) is int else None


def is_tool_error(result: Any) -> bool:
    return type(result) is dict and result.get("isError") is True


def captured(value: Any) -> str:
    """A tool's arguments or result as a span may carry them: secrets redacted, cut to MAX_CONTENT_CHARS."""
    try:
        text = orjson.dumps(redacted(value)).decode()
    except (orjson.JSONEncodeError, RecursionError):
        return "[unencodable]"
    return text if len(text) <= MAX_CONTENT_CHARS else text[:MAX_CONTENT_CHARS] + "..."


def redacted(value: Any, depth: int = 0) -> Any:
    """`value` with the values under secret-looking keys replaced (arguments rarely nest deeply)."""
    if depth > 32:
        return REDACTED
    if isinstance(value, Mapping):
        return {key: REDACTED if _secret(key) else redacted(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [redacted(item, depth + 1) for item in value]
    return value


def prompt_variables(arguments: Any) -> dict[str, str]:
    """prompts/get arguments as `gen_ai.prompt.variable.<name>` attributes (opt-in), redacted and cut."""
    if type(arguments) is not dict:
        return {}
    return {PROMPT_VARIABLE + clipped(name): REDACTED if _secret(name) else captured(value) if type(value) is not str
            else value[:MAX_CONTENT_CHARS] for name, value in arguments.items()}


def _secret(key: Any) -> bool:
    lowered = str(key).lower()
    return any(word in lowered for word in SECRET_WORDS)
