"""Plain 2026-07-28 requests over HTTP, for inputs the SDK client would never send.

Each request carries the envelope in `params._meta` and the routing headers that repeat it;
tests take any of them away or change them. No session, no handshake.
"""

from __future__ import annotations

import itertools
from typing import Any

import aiohttp
import orjson
from multidict import CIMultiDict

MODERN = "2026-07-28"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def envelope(capabilities: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": capabilities or {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw-2026", "version": "1"}, **extra}


class StatelessClient:
    def __init__(self, session: aiohttp.ClientSession, url: str, token: str | None) -> None:
        self.session, self.url, self.token = session, url, token
        self._ids = itertools.count(1)

    def request(self, method: str, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
        """A request with the envelope (plus `meta`) in its `_meta`."""
        params = dict(params or {})
        params["_meta"] = {**envelope(), **params.get("_meta", {}), **meta}
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

    def headers(self, message: Any, **extra: str) -> CIMultiDict[str]:
        """The headers a conforming client sends with `message`; `extra` adds or replaces (value "" drops one)."""
        headers = CIMultiDict(MCP_HEADERS)
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if isinstance(message, dict):
            headers["MCP-Protocol-Version"] = MODERN
            if "method" in message:
                headers["Mcp-Method"] = message["method"]
            name = (message.get("params") or {}).get(NAME_PARAM.get(message.get("method", ""), ""))
            if isinstance(name, str):
                headers["Mcp-Name"] = name
        for key, value in extra.items():
            key = key.replace("_", "-")
            if value == "":
                headers.popall(key, None)
            else:
                headers[key] = value
        return headers

    async def post(self, message: Any, headers: CIMultiDict[str] | None = None,
                   **extra: str) -> tuple[int, Any, Any]:
        data = message if isinstance(message, bytes) else orjson.dumps(message)
        sent = headers if headers is not None else self.headers(message, **extra)
        async with self.session.post(self.url, data=data, headers=sent) as response:
            raw = await response.read()
            parsed = orjson.loads(raw) if raw and response.content_type == "application/json" else raw
            return response.status, parsed, response.headers

    async def call(self, method: str, params: dict[str, Any] | None = None, **meta: Any) -> Any:
        status, body, _ = await self.post(self.request(method, params, **meta))
        assert status == 200, (status, body)
        return body
