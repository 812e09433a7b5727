"""The gateway's one error tree; every failure a client can see is one of these.

    GatewayError                      JSON-RPC code, HTTP status
    ├── ParseError                    -32700, 400   body is not JSON
    ├── InvalidRequest                -32600, 400   not a JSON-RPC 2.0 request, forbidden batch
    ├── MethodNotFound                -32601, 200   unknown method
    ├── InvalidParams                 -32602, 200   missing/bad params, unknown tool or prompt, bad cursor
    ├── ResourceNotFound              -32002, 200   resources/read of a URI the tenant has not got
    ├── HeaderMismatch                -32020, 400   2026-07-28: a routing header is missing or differs from the body
    ├── MissingClientCapability       -32021, 400   2026-07-28: data.requiredCapabilities
    ├── UnsupportedProtocolVersion    -32022, 400   2026-07-28: data.supported, data.requested
    ├── UrlElicitationRequired        -32042, 200   2025-11-25: the user must authorize first (data.elicitations)
    ├── InternalError                 -32603, 200   unexpected failure (details only in the log)
    │   ├── BackendError              -32603, 200   data.reason: a FailureReason (timeout | unavailable |
    │   │                                           circuit_open | overloaded | bad_response | unauthorized)
    │   └── AuthorizationPending      -32603, 200   data.reason "authorization_required", data.url: where to go
    └── HttpError                     no JSON-RPC code of its own; refused at the HTTP layer
        ├── BadRequest                400 (missing session, bad MCP-Protocol-Version)
        ├── Unauthorized              401 + WWW-Authenticate
        ├── Forbidden                 403 (unknown tenant, missing scope, bad Origin/Host)
        │   └── InsufficientScope     403 + WWW-Authenticate error="insufficient_scope"; data.scope
        ├── NotFound                  404 (unknown or ended session)
        ├── MethodNotAllowed          405 + Allow: POST (GET or DELETE at 2026-07-28)
        ├── NotAcceptable             406 (Accept lacks json or event-stream)
        ├── RequestTimeout            408 (body not sent within server.body_timeout_seconds)
        ├── Conflict                  409 (a second GET stream for one session)
        ├── PayloadTooLarge           413 (body over server.max_body_bytes)
        ├── UnsupportedMediaType      415 (Content-Type is not application/json)
        ├── RateLimited               429 + Retry-After
        │   └── LimitReached          429 + Retry-After: a per-tenant budget (sessions, streams,
        │                             in_flight, batch_size); a batch member gets -32603, data.reason "limit"
        └── ServiceUnavailable        503 (the process's connection cap is reached)

At 2026-07-28 a JSON reply's HTTP status follows its JSON-RPC code instead (-32601 404, the
other client errors 400: `protocol.eras.http_status`).
The codes come from `protocol.spec`. `protocol.jsonrpc.error_response` turns an error into
its JSON-RPC error object, and `transport.errors` is the one place an error that escaped a
handler becomes an HTTP reply; foreign exceptions are translated where they enter
(`raise ... from exc`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from gateway.protocol import spec


class FailureReason(StrEnum):
    """Why a backend gave no answer. The values are `data.reason`, metric outcomes and log fields."""

    TIMEOUT = "timeout"
    UNAVAILABLE = "unavailable"  # connect failed, process dead, HTTP 5xx
    CIRCUIT_OPEN = "circuit_open"  # the breaker refused the call without trying
    OVERLOADED = "overloaded"  # the backend's queue is full
    BAD_RESPONSE = "bad_response"  # garbage, wrong id, HTML page, reply over the size limit
    UNAUTHORIZED = "unauthorized"  # no token for it (OAuth failed), or it refused ours (HTTP 401/403)


_REASON_TEXT: dict[FailureReason, str] = {
    FailureReason.TIMEOUT: "timed out",
    FailureReason.UNAVAILABLE: "is unavailable",
    FailureReason.CIRCUIT_OPEN: "is unavailable (circuit open)",
    FailureReason.OVERLOADED: "is overloaded",
    FailureReason.BAD_RESPONSE: "sent an invalid response",
    FailureReason.UNAUTHORIZED: "is not authorized",
}


class GatewayError(Exception):
    """Base of every error the gateway reports to a client."""

    code: int = spec.INTERNAL_ERROR
    http_status: int = 200

    def __init__(self, message: str, *, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class ParseError(GatewayError):
    code, http_status = spec.PARSE_ERROR, 400


class InvalidRequest(GatewayError):
    code, http_status = spec.INVALID_REQUEST, 400


class MethodNotFound(GatewayError):
    code = spec.METHOD_NOT_FOUND


class InvalidParams(GatewayError):
    code = spec.INVALID_PARAMS


class ResourceNotFound(GatewayError):
    """A URI no backend serves this tenant (handshake-era code; `data.uri` names it)."""

    code = spec.RESOURCE_NOT_FOUND

    def __init__(self, uri: str) -> None:
        super().__init__("Resource not found", data={"uri": uri})


class HeaderMismatch(GatewayError):
    code, http_status = spec.HEADER_MISMATCH, 400


class MissingClientCapability(GatewayError):
    code, http_status = spec.MISSING_CLIENT_CAPABILITY, 400

    def __init__(self, required: dict[str, Any]) -> None:
        super().__init__("Missing required client capability", data={"requiredCapabilities": required})


class UnsupportedProtocolVersion(GatewayError):
    code, http_status = spec.UNSUPPORTED_PROTOCOL_VERSION, 400

    def __init__(self, requested: str, supported: list[str]) -> None:
        super().__init__("Unsupported protocol version", data={"supported": supported, "requested": requested})


class UrlElicitationRequired(GatewayError):
    """The user has to authorize the gateway at a backend first; the client may retry after (2025-11-25)."""

    code = spec.URL_ELICITATION_REQUIRED

    def __init__(self, message: str, elicitation: dict[str, Any]) -> None:
        super().__init__(message, data={"elicitations": [elicitation]})


class InternalError(GatewayError):
    code = spec.INTERNAL_ERROR


class AuthorizationPending(InternalError):
    """The user has to authorize the gateway at `backend` first, at `url` (for clients that cannot be asked)."""

    def __init__(self, message: str, *, backend: str, url: str) -> None:
        super().__init__(message, data={"reason": "authorization_required", "backend": backend, "url": url})


class BackendError(InternalError):
    """A backend could not answer; the message names it, `data.reason` says why."""

    def __init__(self, backend: str, reason: FailureReason | str, detail: str = "", *, shown: str = "") -> None:
        """`detail` is for the log only; `shown`, already free of secrets, is added to the message."""
        reason = FailureReason(reason)  # ValueError for a reason outside the tree
        text = f"Backend {backend} {_REASON_TEXT[reason]}" + (f": {shown}" if shown else "")
        super().__init__(text, data={"backend": backend, "reason": reason})
        self.backend = backend
        self.reason = reason
        self.detail = detail  # for the log only, never sent to the client


class HttpError(GatewayError):
    """Refused before any JSON-RPC processing; `headers` go on the HTTP reply."""

    code = spec.INVALID_REQUEST
    http_status = 400
    closes_connection = False  # the connection cannot carry another request after this reply

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.headers = headers or {}


class BadRequest(HttpError):
    http_status = 400


class Unauthorized(HttpError):
    http_status = 401


class Forbidden(HttpError):
    http_status = 403


class InsufficientScope(Forbidden):
    """The token lacks scopes this request needs; `needed` is all of them. The HTTP endpoint adds the
    challenge that lets a client step up; elsewhere (a batch member, stdio) `data.scope` names them."""

    def __init__(self, needed: frozenset[str]) -> None:
        scope = " ".join(sorted(needed))
        super().__init__(f"Forbidden: insufficient scope (needs {scope})")
        self.needed = needed
        self.data = {"scope": scope}


class NotFound(HttpError):
    http_status = 404


class MethodNotAllowed(HttpError):
    http_status = 405


class NotAcceptable(HttpError):
    http_status = 406


class Conflict(HttpError):
    http_status = 409


class PayloadTooLarge(HttpError):
    http_status = 413


class UnsupportedMediaType(HttpError):
    http_status = 415


class RequestTimeout(HttpError):
    http_status = 408
    closes_connection = True  # the rest of the body may still be on its way


class RateLimited(HttpError):
    http_status = 429


class LimitReached(RateLimited):
    """A tenant's budget is spent; `limit` names it (a `TenantLimits` field)."""

    def __init__(self, limit: str, maximum: int) -> None:
        super().__init__(f"Too Many Requests: the tenant's {limit} limit ({maximum}) is reached",
                         headers={"Retry-After": "1"})
        self.limit = limit
        self.data = {"reason": "limit", "limit": limit}

    def in_batch(self) -> InternalError:
        """The same refusal as a batch member's JSON-RPC error (the batch itself was admitted)."""
        return InternalError(self.message, data=self.data)


class ServiceUnavailable(HttpError):
    http_status = 503
