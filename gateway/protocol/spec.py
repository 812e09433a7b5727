"""MCP protocol facts as named constants: the gateway's one vocabulary of versions, headers,
media types, methods, notifications and JSON-RPC error codes.

Sources: ../shared/PROTOCOL-NOTES.md (handshake era) and ../shared/PROTOCOL-2026.md
(the stateless 2026-07-28 revision). This module imports nothing of the gateway.
"""

from __future__ import annotations

import re
from typing import Final

# ---------------------------------------------------------------- versions

LATEST_VERSION: Final = "2025-11-25"
"""The newest handshake-era revision; the answer to an unsupported requested version."""

SUPPORTED_VERSIONS: Final = ("2025-03-26", "2025-06-18", "2025-11-25")
"""Revisions the gateway serves to clients (handshake era)."""

DEFAULT_HEADER_VERSION: Final = "2025-03-26"
"""Assumed when a request carries no MCP-Protocol-Version header (spec: SHOULD assume)."""

BATCH_VERSIONS: Final = frozenset({"2025-03-26"})
"""Revisions whose clients may send JSON-RPC batches (removed in 2025-06-18)."""

MODERN_VERSIONS: Final = ("2026-07-28",)
"""Stateless revisions: no handshake, the version and capabilities ride in every request's `_meta`."""

# ---------------------------------------------------------------- HTTP headers and media types

SESSION_HEADER: Final = "Mcp-Session-Id"
"""Issued on the initialize response; required on every later request."""

VERSION_HEADER: Final = "MCP-Protocol-Version"
"""Sent by clients of 2025-06-18 and later on every request after initialize."""

LAST_EVENT_ID_HEADER: Final = "Last-Event-ID"
"""Sent by a client resuming an SSE stream."""

METHOD_HEADER: Final = "Mcp-Method"
"""2026-07-28: the request's `method`, repeated as a header for routing."""

NAME_HEADER: Final = "Mcp-Name"
"""2026-07-28: `params.name` (tools/call, prompts/get) or `params.uri` (resources/read) as a header."""

PARAM_HEADER_PREFIX: Final = "Mcp-Param-"
"""2026-07-28: a tools/call argument whose inputSchema property names `x-mcp-header: X`, as `Mcp-Param-X`."""

X_MCP_HEADER: Final = "x-mcp-header"
"""2026-07-28: the inputSchema property annotation naming a tools/call argument's header."""

# ---------------------------------------------------------------- 2026-07-28 `_meta` keys

PROTOCOL_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
"""Required in every 2026-07-28 request's `_meta`."""
CLIENT_CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
"""Required in every 2026-07-28 request's `_meta` (`{}`: none); never inferred from earlier requests."""
CLIENT_INFO_KEY: Final = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY: Final = "io.modelcontextprotocol/logLevel"
"""Optional: the request wants `notifications/message` at this level or above (none without it)."""
SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"
"""In every 2026-07-28 result's `_meta`: who answered."""

JSON: Final = "application/json"
SSE: Final = "text/event-stream"
ACCEPT_JSON_AND_SSE: Final = f"{JSON}, {SSE}"
"""A POST must accept both reply forms."""

# ---------------------------------------------------------------- requests

INITIALIZE: Final = "initialize"
PING: Final = "ping"
TOOLS_LIST: Final = "tools/list"
TOOLS_CALL: Final = "tools/call"
PROMPTS_LIST: Final = "prompts/list"
PROMPTS_GET: Final = "prompts/get"
RESOURCES_LIST: Final = "resources/list"
RESOURCES_READ: Final = "resources/read"
RESOURCES_TEMPLATES_LIST: Final = "resources/templates/list"
RESOURCES_SUBSCRIBE: Final = "resources/subscribe"
RESOURCES_UNSUBSCRIBE: Final = "resources/unsubscribe"
COMPLETION_COMPLETE: Final = "completion/complete"
LOGGING_SET_LEVEL: Final = "logging/setLevel"
SERVER_DISCOVER: Final = "server/discover"
"""2026-07-28: replaces the initialize handshake."""
SUBSCRIPTIONS_LISTEN: Final = "subscriptions/listen"
"""2026-07-28: the one stream that carries change notifications."""
TASKS_GET: Final = "tasks/get"
TASKS_UPDATE: Final = "tasks/update"
TASKS_CANCEL: Final = "tasks/cancel"
TASK_METHODS: Final = frozenset({TASKS_GET, TASKS_UPDATE, TASKS_CANCEL})
"""2026-07-28, the tasks extension's methods (`tasks/result` and `tasks/list` are gone there)."""
TASKS_RESULT: Final = "tasks/result"
TASKS_LIST: Final = "tasks/list"
SESSION_TASK_METHODS: Final = frozenset({TASKS_GET, TASKS_RESULT, TASKS_CANCEL, TASKS_LIST})
"""2025-11-25 (experimental, SEP-1686): the task methods of a session (`tasks/update` is 2026's)."""
TASKS_STATUS: Final = "notifications/tasks/status"
TASKS_VERSION: Final = "2025-11-25"
"""The one handshake-era version with tasks (`params.task`, `execution.taskSupport`, the `tasks` capability)."""
RELATED_TASK: Final = "io.modelcontextprotocol/related-task"
"""2025-11-25: the `_meta` key naming the task a message belongs to (`{taskId}`)."""
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
"""The extension's id, in `capabilities.extensions` of discover and of a request's clientCapabilities."""

SAMPLING_CREATE_MESSAGE: Final = "sampling/createMessage"
"""Server to client: ask the client's model."""
ELICITATION_CREATE: Final = "elicitation/create"
"""Server to client: ask the user."""
ROOTS_LIST: Final = "roots/list"
"""Server to client: the client's filesystem roots."""

# ---------------------------------------------------------------- notifications

INITIALIZED: Final = "notifications/initialized"
CANCELLED: Final = "notifications/cancelled"
"""Cancels an earlier request by `params.requestId`."""
PROGRESS: Final = "notifications/progress"
"""Carries `params.progressToken` of the request it reports on."""
MESSAGE: Final = "notifications/message"
"""A log message from server to client."""
TOOLS_LIST_CHANGED: Final = "notifications/tools/list_changed"
PROMPTS_LIST_CHANGED: Final = "notifications/prompts/list_changed"
RESOURCES_LIST_CHANGED: Final = "notifications/resources/list_changed"
RESOURCES_UPDATED: Final = "notifications/resources/updated"
"""A subscribed resource changed; carries `params.uri`."""
ROOTS_LIST_CHANGED: Final = "notifications/roots/list_changed"
SUBSCRIPTIONS_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
"""2026-07-28: the first frame of a subscriptions/listen stream."""
SUBSCRIPTION_ID_KEY: Final = "io.modelcontextprotocol/subscriptionId"
"""2026-07-28: the `_meta` key naming the listen request a notification belongs to."""
LISTEN_FLAGS: Final = {"toolsListChanged": ("tools", TOOLS_LIST_CHANGED),
                       "promptsListChanged": ("prompts", PROMPTS_LIST_CHANGED),
                       "resourcesListChanged": ("resources", RESOURCES_LIST_CHANGED)}
"""2026-07-28 listen filter flag -> (the capability that promises it, the notification it asks for)."""

LIST_CHANGED_ORDER: Final = (TOOLS_LIST_CHANGED, PROMPTS_LIST_CHANGED, RESOURCES_LIST_CHANGED)
"""A server's list of tools, prompts or resources changed; re-list."""
LIST_CHANGED: Final = frozenset(LIST_CHANGED_ORDER)
"""The same notifications, for membership tests."""

KNOWN_METHODS: Final = frozenset({
    INITIALIZE, PING, TOOLS_LIST, TOOLS_CALL, PROMPTS_LIST, PROMPTS_GET, RESOURCES_LIST, RESOURCES_READ,
    RESOURCES_TEMPLATES_LIST, RESOURCES_SUBSCRIBE, RESOURCES_UNSUBSCRIBE, COMPLETION_COMPLETE, LOGGING_SET_LEVEL,
    SERVER_DISCOVER, SUBSCRIPTIONS_LISTEN, INITIALIZED, CANCELLED, PROGRESS, ROOTS_LIST_CHANGED,
    TOOLS_LIST_CHANGED, TASKS_GET, TASKS_UPDATE, TASKS_CANCEL, TASKS_RESULT, TASKS_LIST,
})
"""Methods a client may send, named in metrics; any other becomes `other` so labels stay bounded."""

# ---------------------------------------------------------------- JSON-RPC error codes

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
"""The receiver does not offer this method."""
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
RESOURCE_NOT_FOUND: Final = -32002
"""Handshake era only; 2026-07-28 answers an unknown resource with INVALID_PARAMS."""
HEADER_MISMATCH: Final = -32020
"""2026-07-28: a routing header is missing, malformed or differs from the body (HTTP 400)."""
MISSING_CLIENT_CAPABILITY: Final = -32021
"""2026-07-28: the request needs a client capability it did not declare (HTTP 400)."""
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
"""2026-07-28: the request's protocol version is not served (HTTP 400)."""
URL_ELICITATION_REQUIRED: Final = -32042
"""2025-11-25: retry once the user has been to the URL(s) in `data.elicitations` (never to 2026 clients)."""

# ---------------------------------------------------------------- names

TOOL_NAME: Final = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
"""A tool name every client and LLM function-calling API accepts (spec allows 128)."""

MAX_TOOL_NAME: Final = 64


def negotiate_version(requested: object) -> str:
    """The version to answer `initialize` with: the client's if served, else our latest."""
    return requested if requested in SUPPORTED_VERSIONS else LATEST_VERSION  # type: ignore[return-value]
