"""MCP protocol facts as named constants (sources: ../shared/PROTOCOL-NOTES.md)."""

from __future__ import annotations

import re
from typing import Final

LATEST_VERSION: Final = "2025-11-25"
"""The newest handshake-era revision; the answer to an unsupported requested version."""

SUPPORTED_VERSIONS: Final = ("2025-03-26", "2025-06-18", "2025-11-25")
"""Revisions the gateway serves to clients (handshake era)."""

DEFAULT_HEADER_VERSION: Final = "2025-03-26"
"""Assumed when a request carries no MCP-Protocol-Version header (spec: SHOULD assume)."""

BATCH_VERSIONS: Final = frozenset({"2025-03-26"})
"""Revisions whose clients may send JSON-RPC batches (removed in 2025-06-18)."""

SESSION_HEADER: Final = "Mcp-Session-Id"
"""Issued on the initialize response; required on every later request."""

VERSION_HEADER: Final = "MCP-Protocol-Version"
"""Sent by clients of 2025-06-18 and later on every request after initialize."""

LAST_EVENT_ID_HEADER: Final = "Last-Event-ID"
"""Sent by a client resuming an SSE stream."""

JSON: Final = "application/json"
SSE: Final = "text/event-stream"

INITIALIZE: Final = "initialize"
PING: Final = "ping"
TOOLS_LIST: Final = "tools/list"
TOOLS_CALL: Final = "tools/call"
INITIALIZED: Final = "notifications/initialized"
CANCELLED: Final = "notifications/cancelled"
PROGRESS: Final = "notifications/progress"
TOOLS_LIST_CHANGED: Final = "notifications/tools/list_changed"

KNOWN_METHODS: Final = frozenset({INITIALIZE, PING, TOOLS_LIST, TOOLS_CALL, INITIALIZED,
                                  CANCELLED, PROGRESS, TOOLS_LIST_CHANGED})
"""Methods named in metrics; any other becomes `other` so labels stay bounded."""

TOOL_NAME: Final = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
"""A tool name every client and LLM function-calling API accepts (spec allows 128)."""

MAX_TOOL_NAME: Final = 64


def negotiate_version(requested: object) -> str:
    """The version to answer `initialize` with: the client's if served, else our latest."""
    return requested if requested in SUPPORTED_VERSIONS else LATEST_VERSION  # type: ignore[return-value]
