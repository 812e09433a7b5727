"""What a load-generating client adds to a request at 2026-07-28 (stateless MCP): no handshake and no
session; the protocol version and client capabilities in every request's `_meta`, and headers that
repeat the version, the method and the called tool's name."""

from __future__ import annotations

from typing import Any

MODERN_VERSIONS = ("2026-07-28",)
NAME_PARAMS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""Methods whose `Mcp-Name` header repeats this param."""
CLIENT_INFO = {"name": "bench-loadgen", "version": "1.0.0"}


def is_stateless(version: str) -> bool:
    return version in MODERN_VERSIONS


def enveloped(message: dict[str, Any], version: str) -> dict[str, Any]:
    """`message` with the 2026 envelope in its `params._meta` (a copy)."""
    params = dict(message.get("params") or {})
    params["_meta"] = {**params.get("_meta", {}), "io.modelcontextprotocol/protocolVersion": version,
                       "io.modelcontextprotocol/clientCapabilities": {},
                       "io.modelcontextprotocol/clientInfo": CLIENT_INFO}
    return {**message, "params": params}


def routing_headers(message: dict[str, Any], version: str) -> dict[str, str]:
    """The headers a 2026 request repeats its body in (names here are plain ASCII: no base64 form needed)."""
    headers = {"MCP-Protocol-Version": version}
    method = message.get("method")
    if isinstance(method, str):
        headers["Mcp-Method"] = method
        name = (message.get("params") or {}).get(NAME_PARAMS.get(method, ""))
        if isinstance(name, str):
            headers["Mcp-Name"] = name
    return headers
