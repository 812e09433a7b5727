"""Reading one backend HTTP reply within `max_response_bytes`: a JSON body, or SSE events.

Nothing is buffered past the limit: a body or an event that grows over it is BAD_RESPONSE
at once. The error is raised inside the client's `send` callback, so the client closes the
connection with its unread rest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any

import orjson

from gateway.protocol.errors import FailureReason
from gateway.protocol.spec import JSON
from gateway.protocol.sse import SseDecoder, SseEvent
from gateway.upstream.base import UpstreamError, check_response
from gateway.upstream.http.client import Response


class Refused(UpstreamError):
    """The backend refused the request with an HTTP 4xx that is no JSON-RPC answer to it: it did not
    run it (e.g. a request of the other protocol era). Safe to send again once the era is known."""


class BoundedBody:
    """Reads replies of one backend (`backend` names it in errors) of at most `limit` bytes."""

    def __init__(self, backend: str, limit: int) -> None:
        self.backend = backend
        self.limit = limit

    async def read(self, resp: Response) -> bytes:
        """The body, or BAD_RESPONSE as soon as it passes the limit."""
        if resp.content_length is not None:
            if resp.content_length > self.limit:
                raise self.too_large()
            return await resp.read()  # bounded by the check above
        chunks, size = [], 0
        async for chunk in resp.chunks():
            size += len(chunk)
            if size > self.limit:
                raise self.too_large()
            chunks.append(chunk)
        return b"".join(chunks)

    async def events(self, resp: Response, decoder: SseDecoder) -> AsyncIterator[SseEvent]:
        """Decode an SSE body; an event growing past the limit is cut as BAD_RESPONSE.

        `pending` counts bytes since the last complete event; after a chunk that completed
        events only its tail can be unfinished, so resetting then undercounts by < one chunk.
        """
        pending = 0
        async for chunk in resp.chunks():
            pending += len(chunk)
            if pending > self.limit:
                raise self.too_large()
            events = decoder.feed(chunk)
            if events:
                pending = 0
            for event in events:
                yield event

    async def error_reply(self, resp: Response, request_id: int) -> dict[str, Any]:
        """An HTTP error may still carry the backend's JSON-RPC error for our id: pass it on."""
        if resp.content_type == JSON:
            with suppress(UpstreamError):
                message = check_response(self.backend, self.decode(await self.read(resp)), request_id)
                if "error" in message:
                    return message
        if resp.status in (401, 403):  # our credentials, not the backend, are at fault: no era switch, no breaker
            raise UpstreamError(FailureReason.UNAUTHORIZED, f"{self.backend}: HTTP {resp.status}")
        kind = Refused if 400 <= resp.status < 500 else UpstreamError
        raise kind(FailureReason.UNAVAILABLE, f"{self.backend}: HTTP {resp.status}")

    def decode(self, data: bytes | str) -> Any:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise UpstreamError(FailureReason.BAD_RESPONSE, f"{self.backend}: reply is not JSON") from exc

    def too_large(self) -> UpstreamError:
        return UpstreamError(FailureReason.BAD_RESPONSE, f"{self.backend}: reply over {self.limit} bytes")
