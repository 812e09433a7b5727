"""A small HTTP proxy that maps the conformance suite's fixed names onto a prefixed gateway.

The suite calls `test_simple_text`, reads `test://static-text`, completes for the prompt
`test_prompt_with_arguments`. With the fixture behind `namespace: conf` the gateway knows them as
`conf__test_simple_text` and `conf+test://static-text`, so this proxy rewrites what the suite sends
(tool and prompt names, resource URIs, completion references, and a 2026 `Mcp-Name` header that
names the same) unless it already carries the prefix, and nothing else: every reply
reaches the suite exactly as the gateway sent it, so the gateway's own rewriting of names and URIs
in results is what the suite checks. Requests pass through byte for byte otherwise, SSE streamed.
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
        name_prefix, uri_prefix = f"{namespace}{separator}", f"{namespace}+"
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
        if request.method == "POST":
            body = self.rewrite_body(body, headers)
        async with self.session.request(request.method, self.target, data=body or None, headers=headers,
                                        allow_redirects=False) as upstream:
            reply = web.StreamResponse(status=upstream.status, headers={
                k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP})
            await reply.prepare(request)
            async for chunk in upstream.content.iter_any():
                self.replies.append(chunk)
                await reply.write(chunk)
            await reply.write_eof()
            return reply

    def rewrite_body(self, body: bytes, headers: dict[str, str]) -> bytes:
        """The body with the suite's names mapped; a 2026 `Mcp-Name` header that matched it, too."""
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            return body  # the suite's deliberately broken bodies go through untouched
        messages = message if isinstance(message, list) else [message]
        before = self.rewritten
        changed = [self.rewrite(m) for m in messages if isinstance(m, dict)]
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
