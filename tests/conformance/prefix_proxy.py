"""A small HTTP proxy that maps the conformance suite's fixed names onto a prefixed gateway.

The suite calls `test_simple_text`, reads `test://static-text`, completes for the prompt
`test_prompt_with_arguments`. With the fixture behind `namespace: conf` the gateway knows them as
`conf__test_simple_text` and `conf+test://static-text`, so this proxy rewrites what the suite sends
(tool and prompt names, resource URIs, completion references, and a 2026 `Mcp-Name` header that
names the same) unless it already carries the prefix, and nothing else: every reply
reaches the suite as the gateway sent it, so the gateway's own rewriting of names and URIs in
results is what the suite checks. Two exceptions, the way a client that knows the namespace reads
what it compares with its own names: an error naming (in `data.uri`) the very URI the proxy mapped in
this request names the suite's URI again (SEP-2164's check compares it with the URI it asked for),
and a JSON `tools/list` result names the tools without the prefix (json-schema-2020-12 looks its tool
up by name). `replies` keeps every reply as the gateway wrote it, for the test's prefix checks.
Requests pass through byte for byte otherwise, SSE streamed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp
import orjson
from aiohttp import web

HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade",
              "proxy-connection", "te", "trailer"}
NAMED = {"tools/call", "prompts/get"}
ADDRESSED = {"resources/read", "resources/subscribe", "resources/unsubscribe"}


class PrefixProxy:
    """Forwards `/mcp` to `target` (its query string included), prefixing names on the way in."""

    def __init__(self, target: str, namespace: str, separator: str) -> None:
        self.target = target
        # Names the suite took from the gateway's own lists already carry the prefix: left alone.
        self.name_prefix = name_prefix = f"{namespace}{separator}"
        uri_prefix = f"{namespace}+"
        self.name: Callable[[str], str] = lambda name: name if name.startswith(name_prefix) else name_prefix + name
        self.uri: Callable[[str], str] = lambda uri: uri if uri.startswith(uri_prefix) else uri_prefix + uri
        self.rewritten = 0
        self.replies: list[bytes] = []  # every reply body, as the gateway sent it

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/mcp", self.forward)
        app.cleanup_ctx.append(self._session)
        return app

    async def _session(self, app: web.Application) -> Any:
        async with aiohttp.ClientSession(auto_decompress=False) as self.session:
            yield

    async def forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        mapped: list[tuple[str, str]] = []
        listing = False
        if request.method == "POST":
            body = self.rewrite_body(body, headers, mapped)
            listing = b'"tools/list"' in body
        async with self.session.request(request.method, self.target, data=body or None, headers=headers,
                                        allow_redirects=False) as upstream:
            reply = web.StreamResponse(status=upstream.status, headers={
                k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP})
            if (mapped or listing) and upstream.content_type == "application/json":
                whole = await upstream.read()
                self.replies.append(whole)
                return web.Response(body=self.named_back(whole, mapped), status=upstream.status,
                                    headers=reply.headers)
            await reply.prepare(request)
            async for chunk in upstream.content.iter_any():
                self.replies.append(chunk)
                await reply.write(chunk)
            await reply.write_eof()
            return reply

    def named_back(self, body: bytes, mapped: list[tuple[str, str]]) -> bytes:
        """An error that names in `data.uri` a URI this request's mapping made names the suite's own again; a
        tools/list result names its tools without the prefix."""
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            return body
        result = message.get("result") if isinstance(message, dict) else None
        if isinstance(result, dict) and isinstance(result.get("tools"), list):
            for tool in result["tools"]:
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    tool["name"] = tool["name"].removeprefix(self.name_prefix)
            return orjson.dumps(message)
        error = message.get("error") if isinstance(message, dict) else None
        data = error.get("data") if isinstance(error, dict) else None
        back = {new: old for old, new in mapped}
        if not isinstance(data, dict) or data.get("uri") not in back:
            return body
        data["uri"] = back[data["uri"]]
        return orjson.dumps(message)

    def rewrite_body(self, body: bytes, headers: dict[str, str], mapped: list[tuple[str, str]]) -> bytes:
        """The body with the suite's names mapped (each (old, new) added to `mapped`); a 2026 `Mcp-Name`
        header that matched it, too."""
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            return body  # the suite's deliberately broken bodies go through untouched
        messages = message if isinstance(message, list) else [message]
        before = self.rewritten
        changed = [self.rewrite(m) for m in messages if isinstance(m, dict)]
        mapped += filter(None, changed)
        for old, new in filter(None, changed):
            for key, value in headers.items():
                if key.lower() == "mcp-name" and value.strip() == old:  # a deliberate mismatch stays one
                    headers[key] = new
        return orjson.dumps(message) if self.rewritten > before else body

    def rewrite(self, message: dict[str, Any]) -> tuple[str, str] | None:
        """Map one request's name or URI; returns (old, new) when it was one the routing headers name."""
        params = message.get("params")
        if not isinstance(params, dict):
            return None
        method = message.get("method")
        if method == "completion/complete" and isinstance(params.get("ref"), dict):
            self.rewrite_ref(params["ref"])
            self.rewritten += 1
            return None
        field, mapping = ("name", self.name) if method in NAMED else ("uri", self.uri)
        if method not in NAMED | ADDRESSED or not isinstance(params.get(field), str):
            return None
        old = params[field]
        params[field] = mapping(old)
        self.rewritten += 1
        return old, params[field]

    def rewrite_ref(self, ref: dict[str, Any]) -> None:
        if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
            ref["name"] = self.name(ref["name"])
        elif ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
            ref["uri"] = self.uri(ref["uri"])
