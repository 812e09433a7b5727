"""Writing a reply body: small ones handed to aiohttp, large ones written here, once and counted.

A large reply is written by its handler rather than after it, so that it can be counted against its
tenant (`transport.held`) until the client has taken it: aiohttp's `write` returns only once the
transport's buffer is back under its limit. It is written in pieces: aiohttp joins a reply's head
and body into one new buffer (a second copy of the body, held as long as the client does not read),
while a prepared response with a length sends its head alone and then the body as it is: the handler
and the transport hold the same object, one copy in flight. An SSE stream is chunked, and aiohttp
frames each chunk into a new buffer: a large event goes in slices, each written once the client has
taken the one before, so the copies in flight are one slice.
"""

from __future__ import annotations

from aiohttp import web

from gateway.protocol import spec
from gateway.protocol.sse import encode_event
from gateway.transport.held import LARGE_REPLY, HeldReplies
from gateway.transport.requestlog import stream_headers

SSE_DATA = b"data: "
SSE_END = b"\n\n"
SLICE = 256 * 1024
"""A large SSE event is written in pieces of this size (see the module docstring)."""


async def send_json(request: web.Request, body: bytes, replies: HeldReplies, tenant: str, *,
                    status: int = 200, headers: dict[str, str] | None = None) -> web.StreamResponse:
    """A JSON reply; a large one is written before this returns, counted while the client takes it."""
    if len(body) < LARGE_REPLY:
        return web.Response(body=body, status=status, content_type=spec.JSON, headers=headers)
    response = web.StreamResponse(status=status, headers=stream_headers(request, headers or {}))
    response.content_type = spec.JSON
    response.content_length = len(body)
    with replies.holding(tenant, len(body)):
        try:
            await response.prepare(request)  # the head, alone
            await response.write(body)  # back once the client has taken all but the transport's last 64 KiB
            await response.write_eof()
        except ConnectionError:
            pass  # the client went away, or the write deadline cut it (connections.py): nothing is held
    return response


async def write_event(response: web.StreamResponse, data: bytes, replies: HeldReplies, tenant: str) -> None:
    """One SSE `message` event of JSON (no line breaks: orjson writes none); a large one counted as above."""
    if len(data) < LARGE_REPLY or b"\n" in data or b"\r" in data:
        await response.write(encode_event(data))
        return
    with replies.holding(tenant, len(data)):
        await response.write(SSE_DATA)
        view = memoryview(data)
        for start in range(0, len(data), SLICE):
            await response.write(view[start:start + SLICE])  # aiohttp waits for the client between them
        await response.write(SSE_END)
