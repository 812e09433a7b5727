"""The reference upstream HTTP client: aiohttp's `ClientSession` behind the one-`send` interface.

Selected with `upstream.http_client: aiohttp`. aiohttp brings proxies from the environment
(`trust_env`), happy eyeballs, idle-connection cleanup, decoding and head limits of its own;
this module adds what the interface promises beyond them (the one retry of a stale reused
connection after a reset, for any method; same-origin 307/308 only) and translates aiohttp's
exceptions into the interface's at this one boundary. Unlike the builtin client it cannot
look at a pooled socket before reuse (aiohttp has no public way to), so a connection closed
while the loop was busy fails a POST that the builtin client would have sent elsewhere.
"""

from __future__ import annotations

import errno
from collections.abc import AsyncIterator, Mapping
from types import SimpleNamespace
from typing import Any

import aiohttp

from gateway.upstream.http.client import (
    ACCEPT_ENCODING,
    IDEMPOTENT,
    MAX_FIELD_BYTES,
    MAX_HEADERS,
    USER_AGENT,
    BadReply,
    ClientOptions,
    ConnectFailed,
    Consume,
    T,
    Target,
    TransportFailed,
    redirect_path,
)

REDIRECT_STATUSES = frozenset((301, 302, 303, 307, 308))


class AiohttpResponse:
    """An aiohttp reply seen through the interface's `Response`."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.status = response.status
        self.headers: dict[str, str] = {}
        for name, value in response.headers.items():
            key = name.lower()
            self.headers[key] = f"{self.headers[key]}, {value}" if key in self.headers else value
        self.content_type = response.content_type.lower()
        encoded = "content-encoding" in self.headers
        self.content_length = None if encoded else response.content_length
        self._response = response

    async def read(self) -> bytes:
        return await self._response.read()

    async def chunks(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.content.iter_any():
            yield chunk


class AiohttpClient:
    """Requests to one backend URL through an aiohttp session made on first use (inside the loop)."""

    def __init__(self, url: str, options: ClientOptions) -> None:
        self.target = Target.parse(url, options.tls)
        self._options = options
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    async def send(self, method: str, headers: Mapping[str, str], body: bytes | None, consume: Consume[T]) -> T:
        try:
            return await self._send(method, self.target.path, headers, body, consume, redirected=False)
        except aiohttp.ClientConnectorError as exc:
            raise ConnectFailed(f"cannot connect: {exc}") from exc
        except aiohttp.ClientResponseError as exc:  # aiohttp's parser refused the reply (head limits, garbage)
            raise BadReply(f"malformed HTTP reply: {exc.message}") from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransportFailed(f"{type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        self._closed = True
        if self._session is not None:
            await self._session.close()

    async def _send(self, method: str, path: str, headers: Mapping[str, str], body: bytes | None,
                    consume: Consume[T], *, redirected: bool) -> T:
        for attempt in (1, 2):
            trace = SimpleNamespace(reused=False, answered=False)
            try:
                async with self._client().request(
                    method, self.target.url_for(path),
                    headers=headers, data=body, allow_redirects=False, trace_request_ctx=trace,
                ) as response:
                    trace.answered = True
                    if response.status in REDIRECT_STATUSES:
                        return await self._redirect(method, response, headers, body, consume, redirected)
                    return await consume(AiohttpResponse(response))
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                stale = trace.reused and not trace.answered
                if attempt == 2 or not (stale and (method in IDEMPOTENT or _reset(exc))):
                    raise
        raise AssertionError("unreachable")

    async def _redirect(self, method: str, response: aiohttp.ClientResponse, headers: Mapping[str, str],
                        body: bytes | None, consume: Consume[T], redirected: bool) -> T:
        location = response.headers.get("Location")
        if redirected:
            raise BadReply(f"HTTP {response.status} redirect to {location} after a redirect: not followed")
        path = redirect_path(self.target, response.status, location)
        response.close()
        return await self._send(method, path, headers, body, consume, redirected=True)

    def _client(self) -> aiohttp.ClientSession:
        if self._closed:
            raise ConnectFailed("client closed")
        if self._session is None:
            self._session = self._open()
        return self._session

    def _open(self) -> aiohttp.ClientSession:
        options = self._options
        trace = aiohttp.TraceConfig()
        trace.on_connection_reuseconn.append(_mark_reused)
        connector = aiohttp.TCPConnector(limit=options.max_connections, keepalive_timeout=options.idle_seconds,
                                         ssl=self.target.tls or True)
        return aiohttp.ClientSession(
            connector=connector, trust_env=options.proxy_from_env, trace_configs=[trace],
            timeout=aiohttp.ClientTimeout(total=None),  # the caller bounds each exchange
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": ACCEPT_ENCODING},
            max_field_size=MAX_FIELD_BYTES, max_line_size=MAX_FIELD_BYTES, max_headers=MAX_HEADERS,
        )


def _reset(exc: aiohttp.ClientError) -> bool:
    """Whether the server reset the connection (its kernel had our request unread)."""
    return isinstance(exc, aiohttp.ClientOSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE)


async def _mark_reused(session: aiohttp.ClientSession, context: SimpleNamespace, params: Any) -> None:
    context.trace_request_ctx.reused = True
