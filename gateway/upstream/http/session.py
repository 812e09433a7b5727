"""One backend session of the HTTP upstream, and the headers its requests carry."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from multidict import CIMultiDict

from gateway.protocol.capabilities import NONE
from gateway.protocol.errors import FailureReason
from gateway.protocol.spec import ACCEPT_JSON_AND_SSE, JSON, LAST_EVENT_ID_HEADER, SESSION_HEADER, SSE, VERSION_HEADER
from gateway.upstream.base import NotificationHandler, RequestHandler, UpstreamError

SESSION_HEADER_KEY = SESSION_HEADER.lower()
"""The backend's session id header, as reply headers are keyed."""

SessionKey = tuple[str, frozenset[str]]
"""Whom a backend session serves: a tenant (or "" for the catalogue), and the relayable
capabilities of its clients (declared to the backend at the session's initialize)."""
CATALOGUE_KEY: SessionKey = ("", NONE)
"""The gateway's own session (catalogue work): no client, no capabilities."""


OwnAuth = Callable[[str], Awaitable[str | None]]
"""The Authorization of the gateway's own requests (its catalogue's) to backend `name`; None: the configured
headers. Raises UpstreamError(UNAUTHORIZED) when there is none to be had."""


async def own_headers(own_auth: OwnAuth, backend: str) -> dict[str, str] | None:
    authorization = await own_auth(backend)
    return {"Authorization": authorization} if authorization else None


def merged_headers(configured: CIMultiDict[str], call: Mapping[str, str] | None) -> CIMultiDict[str]:
    """Configured headers, overridden (case-insensitively) by this call's."""
    if not call:
        return configured
    merged = configured.copy()
    merged.update(call)
    return merged


@dataclass(eq=False)
class BackendSession:
    """One backend session; `headers` are those of the handshake (reused by DELETE, GET)."""

    key: SessionKey
    headers: CIMultiDict[str]
    session_id: str | None = None
    protocol_version: str | None = None

    def renew(self, headers: CIMultiDict[str]) -> None:
        """A call's Authorization becomes the session's, so its GET stream reconnects with a live token."""
        authorization = headers.get("Authorization")
        if authorization is not None and authorization != self.headers.get("Authorization"):
            self.headers = self.headers.copy()
            self.headers["Authorization"] = authorization

    def post_headers(self, headers: CIMultiDict[str]) -> CIMultiDict[str]:
        """`headers` plus what every POST (and DELETE) in this session carries."""
        result = headers.copy()
        result["Accept"] = ACCEPT_JSON_AND_SSE
        result["Content-Type"] = JSON
        if self.protocol_version:
            result[VERSION_HEADER] = self.protocol_version
        if self.session_id:
            result[SESSION_HEADER] = self.session_id
        return result

    def stream_headers(self, last_event_id: str | None) -> CIMultiDict[str]:
        """The headers of a GET that opens (or resumes, after `last_event_id`) an SSE stream."""
        headers = self.post_headers(self.headers)
        headers["Accept"] = SSE
        headers.popall("Content-Type", None)
        if last_event_id is not None:
            headers[LAST_EVENT_ID_HEADER] = last_event_id
        return headers


Handlers = tuple[NotificationHandler | None, RequestHandler | None]
"""One call's handlers: for the backend's notifications, and for its requests, about that call."""
NO_HANDLERS: Handlers = (None, None)


@dataclass(frozen=True)
class Route:
    """Where the notifications about one request go, and how its token maps back."""

    request_id: int
    token: str | None
    original_token: Any
    handler: NotificationHandler | None
    on_request: RequestHandler | None = None


class SessionExpired(UpstreamError):
    """The backend answered 404 to our session id; a second one in a row is UNAVAILABLE."""

    def __init__(self, backend: str) -> None:
        super().__init__(FailureReason.UNAVAILABLE, f"{backend}: backend session expired (HTTP 404)")
