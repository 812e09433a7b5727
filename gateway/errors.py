"""The gateway's one error tree; every failure a client can see is one of these.

    GatewayError                      JSON-RPC code, HTTP status
    ├── ParseError                    -32700, 400   body is not JSON
    ├── InvalidRequest                -32600, 400   not a JSON-RPC 2.0 request, forbidden batch
    ├── MethodNotFound                -32601, 200   unknown method
    ├── InvalidParams                 -32602, 200   missing/bad params, unknown tool, bad cursor
    ├── InternalError                 -32603, 200   unexpected failure (details only in the log)
    │   └── BackendError              -32603, 200   data.reason: timeout | unavailable | circuit_open
    └── HttpError                     no JSON-RPC code of its own; refused at the HTTP layer
        ├── Unauthorized              401 + WWW-Authenticate
        ├── Forbidden                 403 (unknown tenant, missing scope, bad Origin/Host)
        ├── NotFound                  404 (unknown or ended session)
        ├── NotAcceptable             406 (Accept lacks json or event-stream)
        ├── Conflict                  409 (a second GET stream for one session)
        ├── UnsupportedMediaType      415 (Content-Type is not application/json)
        ├── PayloadTooLarge           413 (body over server.max_body_bytes)
        ├── RateLimited               429 + Retry-After
        └── BadRequest                400 (missing session, bad MCP-Protocol-Version)

`protocol.jsonrpc.error_response` and `transport.http` are the only places that turn these
into bytes; foreign exceptions are translated where they enter (`raise ... from exc`).
"""

from __future__ import annotations

from typing import Any


class GatewayError(Exception):
    """Base of every error the gateway reports to a client."""

    code: int = -32603
    http_status: int = 200

    def __init__(self, message: str, *, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class ParseError(GatewayError):
    code, http_status = -32700, 400


class InvalidRequest(GatewayError):
    code, http_status = -32600, 400


class MethodNotFound(GatewayError):
    code = -32601


class InvalidParams(GatewayError):
    code = -32602


class InternalError(GatewayError):
    code = -32603


class BackendError(InternalError):
    """A backend could not answer; `reason` is one of REASONS."""

    REASONS = ("timeout", "unavailable", "circuit_open", "overloaded", "bad_response")

    def __init__(self, backend: str, reason: str, detail: str = "") -> None:
        assert reason in self.REASONS, reason
        text = {
            "timeout": "timed out",
            "unavailable": "is unavailable",
            "circuit_open": "is unavailable (circuit open)",
            "overloaded": "is overloaded",
            "bad_response": "sent an invalid response",
        }[reason]
        super().__init__(f"Backend {backend} {text}", data={"backend": backend, "reason": reason})
        self.backend = backend
        self.reason = reason
        self.detail = detail  # for the log only, never sent to the client


class HttpError(GatewayError):
    """Refused before any JSON-RPC processing; `headers` go on the HTTP reply."""

    code = -32600
    http_status = 400

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.headers = headers or {}


class BadRequest(HttpError):
    http_status = 400


class Unauthorized(HttpError):
    http_status = 401


class Forbidden(HttpError):
    http_status = 403


class NotFound(HttpError):
    http_status = 404


class NotAcceptable(HttpError):
    http_status = 406


class Conflict(HttpError):
    http_status = 409


class PayloadTooLarge(HttpError):
    http_status = 413


class UnsupportedMediaType(HttpError):
    http_status = 415


class RateLimited(HttpError):
    http_status = 429
