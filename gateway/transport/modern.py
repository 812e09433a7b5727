"""2026-07-28 requests: one request, one answer, no session (../shared/PROTOCOL-2026.md §A).

A transport hands a 2026 body here once its caller is authenticated and admitted, exactly as a
session's request is (Origin and Host, body limit, token, tenant, rate). `admit` then runs the
rest of the official SDK's ladder, in its order: a notification is acknowledged and dropped
(or refused for an unserved version, -32022); a batch or a posted response is -32600; a
duplicated routing header -32020; the envelope and the headers that repeat it
(`eras.envelope_of`: -32602, -32020, -32022); `Mcp-Param-*` against the called tool's schema
-32020. What passes becomes a request context of its own: the client's capabilities and log
level come from this request's `_meta`, never from an earlier one.

The request's channel (the transport's, told the envelope) carries its progress and, at or above
its logLevel only, its log messages (`wanted`); never a server-to-client request, which 2026
forbids: what a backend asks such a client becomes a multi-round trip instead (transport.rounds).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import orjson
from multidict import MultiMapping

from gateway.protocol import eras, jsonrpc, spec
from gateway.protocol.capabilities import NONE
from gateway.protocol.capabilities import declared as relayable
from gateway.protocol.eras import Envelope
from gateway.protocol.errors import GatewayError, HeaderMismatch, InvalidRequest
from gateway.protocol.jsonrpc import JsonObject, Message, RequestId
from gateway.protocol.request_state import INPUT_METHODS, StateSeal
from gateway.protocol.routing_headers import VERSION_KEY, HeaderParams, header_params, param_mismatch
from gateway.tenancy import RequestContext
from gateway.tracing.context import TraceContext, chosen
from gateway.transport.channel import ChannelClosed
from gateway.transport.exchange import Caller, Exchange

if TYPE_CHECKING:
    from gateway.tracing.spans import RequestSpan

SEALED_METHODS = INPUT_METHODS | spec.TASK_METHODS
"""Requests whose 2026 backend's answer may carry a state or task sealed for the client (or that name one)."""


class NoBackChannel(ChannelClosed):
    """A 2026-07-28 request cannot carry a server-to-client request (rounds do it by retries instead)."""


class StatelessRequests:
    """Admits the 2026-07-28 requests of one exchange core."""

    def __init__(self, exchange: Exchange, seal: StateSeal | None = None) -> None:
        """`seal`: the one 2026 backends' states and task handles are sealed with (None: none are)."""
        self.exchange, self.seal = exchange, seal
        self.catalogue = exchange.dispatcher.catalogue
        # A 2026 request (its tenant's in-flight slot taken) runs straight through the dispatcher: the
        # in-flight registry exists for notifications/cancelled, which 2026 does not have (closing the
        # stream cancels the handler).
        self.run = exchange.dispatcher.handle

    def admit(self, data: Any, headers: MultiMapping[str] | None, caller: Caller, request_id: str,
              trace: TraceContext, span: RequestSpan | None = None) -> tuple[Message, RequestContext] | None:
        """The request and its context; None for a notification (202); a GatewayError for the ladder's refusals.

        `trace`: the transport's trace context (its headers', or a new one), which the request's `_meta`
        one replaces while tracing is off; with `span` (tracing on) the span's is the request's.

        Every 2026 call runs this: it is written for the interpreter (few calls), not for reuse.
        """
        if isinstance(data, list):
            raise InvalidRequest("Invalid Request: no batches at 2026-07-28")
        message = jsonrpc.parse_message(data)
        method = message.method
        if method is None or "id" not in data:
            return _unanswered(message, headers)
        params: JsonObject = message.params  # type: ignore[assignment]  # the envelope is in it
        envelope = eras.take_envelope(method, params, headers)
        header_tools = self.catalogue.current.header_tools  # most catalogues have none: cheap to tell
        if header_tools and method == spec.TOOLS_CALL and type(name := params.get("name")) is str and (
                name in header_tools):
            self._check_param_headers(caller, params, headers)
        if span is not None:
            trace = tuple.__new__(TraceContext, (span.traceparent, None, True))  # NamedTuple's __new__: a Python call
        elif (meta := params.get("_meta")) is not None:  # what is left of it, for the backend
            trace = chosen(meta, trace)  # 2026 carries the trace here (SEP-414): it wins over the header's
        declared = envelope.client_capabilities
        ctx = RequestContext(caller[0], caller[1], request_id, envelope.protocol_version, None, method,
                             traceparent=trace.traceparent, tracestate=trace.tracestate, span=span,
                             # what this request's backend may ask its client in rounds (transport.rounds)
                             capabilities=relayable(declared) if declared else NONE,
                             log_level=envelope.log_level, envelope=envelope,
                             seal=self.seal if method in SEALED_METHODS else None, params=params)
        return message, ctx

    def _check_param_headers(self, caller: Caller, params: JsonObject, headers: MultiMapping[str]) -> None:
        """The called tool's `x-mcp-header` arguments against their headers (an unknown tool is dispatch's -32602)."""
        name, arguments = params["name"], params.get("arguments")
        entry = self.catalogue.view(caller[1], caller[0]).by_name.get(name)
        if entry is None or not isinstance(arguments, dict | None):
            return  # not this tenant's: dispatch answers as for any unknown tool
        annotated = _header_params(entry.tool.tail)
        problem = param_mismatch(annotated, arguments or {}, headers) if annotated else None
        if problem:
            raise HeaderMismatch(f"Header mismatch: {problem}")


def _unanswered(message: Message, headers: MultiMapping[str]) -> None:
    """A notification is acknowledged and dropped (None); a posted response is refused.

    Cancellation is closing the stream; a posted notifications/cancelled naming an id could
    cancel someone else's request, and no other client notification is defined.
    """
    if not message.is_notification:
        raise InvalidRequest("Invalid Request: a 2026-07-28 client sends requests, not responses (it is asked nothing)")
    version = headers.get(VERSION_KEY, "")
    if version not in spec.MODERN_VERSIONS:
        raise eras.unsupported(version)


@functools.lru_cache(maxsize=256)
def _header_params(tool_tail: bytes) -> HeaderParams | None:
    """A tool's header arguments, worked out once per tool version (its JSON after the name is the key)."""
    tool = orjson.loads(b"{" + tool_tail[1:])
    return header_params(tool.get("inputSchema"))


def error_reply(request_id: RequestId | None, error: GatewayError) -> JsonObject:
    """A refusal as 2026 sends it: the request's id, null when it is not known."""
    reply = jsonrpc.error_response(request_id, error)
    reply.setdefault("id", None)
    return reply


def reply_status(reply: JsonObject) -> int:
    """A 2026 JSON reply's HTTP status: its error code's (`eras.http_status`), else 200."""
    error = reply.get("error")
    return eras.http_status(error.get("code")) if isinstance(error, dict) else 200


def wanted(message: JsonObject, envelope: Envelope) -> bool:
    """Whether a notification goes to a 2026 client: its progress, and log messages only when it asked
    for them, at its level or above."""
    if message.get("method") != spec.MESSAGE:
        return True
    params = message.get("params")
    return isinstance(params, dict) and envelope.logs(params.get("level"))


def no_back_channel(method: str) -> NoBackChannel:
    """What asking a 2026 client something raises: a call that may ask runs in rounds (transport.rounds)."""
    return NoBackChannel(f"{method} cannot reach a 2026-07-28 client: it takes no server-to-client requests")
