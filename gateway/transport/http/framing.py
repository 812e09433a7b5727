"""The HTTP framing every MCP request must have: a JSON body within its limits, and an Accept header that
takes the reply."""

from __future__ import annotations

import asyncio
import functools

from aiohttp import web

from gateway.protocol import spec
from gateway.protocol.errors import NotAcceptable, ParseError, PayloadTooLarge, RequestTimeout, UnsupportedMediaType

MAX_ACCEPT_CHARS = 1024
"""Longer Accept headers are cut: no real client sends one, and the cache keys stay small."""


async def read_body(request: web.Request, limit: int, seconds: float) -> bytes:
    """The whole body: at most `limit` bytes (413), within `seconds` once it is under way (408)."""
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(f"Payload Too Large: the limit is {limit} bytes")
    try:
        if request.content.is_eof():  # all there already (the usual case): no deadline to arm
            return await request.read()
        async with asyncio.timeout(seconds):
            return await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        raise PayloadTooLarge(f"Payload Too Large: the limit is {limit} bytes") from exc
    except TimeoutError as exc:
        raise RequestTimeout(f"Request Timeout: the body took over {seconds:g} s") from exc
    except web.RequestPayloadError as exc:  # e.g. Content-Encoding: gzip on a body that is not gzip
        raise ParseError("Parse error: the body could not be decoded") from exc


def require_json_content(request: web.Request) -> None:
    if request.content_type != spec.JSON:
        raise UnsupportedMediaType("Unsupported Media Type: Content-Type must be application/json")


def require_accept(request: web.Request, *types: str) -> None:
    offered = _media_types(request.headers.get("Accept", "")[:MAX_ACCEPT_CHARS])
    if "*/*" in offered:
        return
    for media in types:
        if media not in offered and f"{media.split('/')[0]}/*" not in offered:
            raise NotAcceptable(f"Not Acceptable: Accept must include {' and '.join(types)}")


@functools.lru_cache(maxsize=256)
def _media_types(accept: str) -> frozenset[str]:
    """The media types an Accept header lists (cached: a client sends the same one every time)."""
    return frozenset(part.split(";", 1)[0].strip().lower() for part in accept.split(","))
