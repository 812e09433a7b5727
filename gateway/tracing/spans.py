"""The gateway's spans, when tracing is on: one SERVER span per MCP request it serves, one CLIENT span per
request it sends a backend (or a client), and INTERNAL spans for the work in between.

Parents, as the MCP conventions say (conventions.py): a request's `params._meta` context is the SERVER
span's parent and the HTTP headers' context a link; without a `_meta` context the headers' is the
parent. A CLIENT span's context goes to the backend in `params._meta` (both eras, every transport)
and, over HTTP, in the `traceparent`/`tracestate` headers too. A request the sampler drops gets no
CLIENT spans: its SERVER span's (unsampled) context is what the backend hears, so every process
of the trace agrees not to record it.

The innermost span of the task at hand is `context.CURRENT`, so work that has no request context of
its own (a JWKS fetch inside authentication, a retry inside the upstream, a catalogue page) finds
its parent. The transport sets and resets it (`ServerSpan.activate`, `end`).
"""

from __future__ import annotations

import contextvars
import random
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace import set_span_in_context as _with_span
from opentelemetry.trace.span import TraceState

from gateway.config import Backend, HttpBackend, TracingConfig
from gateway.protocol import spec
from gateway.tracing import conventions as c
from gateway.tracing.context import CURRENT, TRACEPARENT, TRACESTATE, TraceContext, Unsampled, of_meta, with_context
from gateway.tracing.conventions import Peer
from gateway.tracing.provider import VERSION, PresetIds, Sampling, shut_down


class _Caller(Protocol):
    @property
    def tenant(self) -> str: ...
    @property
    def subject(self) -> str: ...


class RequestReport(Protocol):
    """What a SERVER span records of its request when it ends (a `tenancy.RequestContext` has these)."""

    @property
    def principal(self) -> _Caller: ...
    @property
    def request_id(self) -> str: ...
    @property
    def protocol_version(self) -> str: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def envelope(self) -> object | None: ...
    @property
    def backend(self) -> str | None: ...
    @property
    def outcome(self) -> str: ...

_EMPTY = Context()
_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}


class Tracing:
    """The gateway's tracer, its settings, and its provider (closed with the gateway)."""

    def __init__(self, config: TracingConfig, provider: TracerProvider, sampling: Sampling, ids: PresetIds) -> None:
        self.config, self.provider, self.sampling, self.ids = config, provider, sampling, ids
        self.tracer = provider.get_tracer("mcp-gateway", VERSION)
        self._backends: dict[str, dict[str, Any]] = {}  # each backend's server.* attributes, worked out once

    async def close(self) -> None:
        await shut_down(self.provider)

    def server(self, message: Any, header: TraceContext | None, peer: Callable[[Any], Peer],
               source: Any = None) -> ServerSpan | Unsampled:
        """The SERVER span of one inbound request (`message`: its decoded JSON object; `peer(source)`: where
        it came from, asked only of a request the sampler keeps). A request it drops gets no span (`Unsampled`)."""
        params = message.get("params")
        given = of_meta(params.get("_meta")) if type(params) is dict else None
        parent = given or header
        if parent is None:
            trace_id = random.getrandbits(128) or 1
            if not self.sampling.sampled(None, trace_id):
                return Unsampled(trace_id, None)
            self.ids.trace_id = trace_id  # the SDK's span gets the trace id the decision was taken on
        elif not self.sampling.sampled(int(parent.traceparent[53:55], 16), int(parent.traceparent[3:35], 16)):
            return Unsampled(int(parent.traceparent[3:35], 16), parent.tracestate)
        method = message.get("method")
        method = method if type(method) is str else "unknown"
        attributes = c.request_attributes(method, params, message.get("id"))
        attributes.update(peer(source).attributes())
        links = ()
        if given is not None and header is not None and header.traceparent != given.traceparent:
            links = (Link(remote(header)),)  # the transport's context: a link, not the parent (SEP-414)
        if self.config.capture_arguments and type(params) is dict:
            attributes.update(_arguments(method, params))
        span = self.tracer.start_span(c.span_name(method, None), _parent_context(parent), SpanKind.SERVER,
                                      attributes, links)
        return ServerSpan(self, span, method, params)

    def internal(self, name: str, attributes: Mapping[str, Any] | None = None, *, parent: Traced | None = None,
                 links: tuple[Traced | None, ...] = (), kind: str = "internal", root: bool = False) -> InternalSpan:
        """A span for work inside the gateway (`kind` client: a request it sends); its parent is `parent`,
        else the current span, else none (`root`: none, whatever is current)."""
        parent = None if root else parent if parent is not None else CURRENT.get()
        span_links = [Link(linked.span.get_span_context()) for linked in links if linked is not None]
        span = self.tracer.start_span(name, parent.context if parent is not None else _EMPTY, _KINDS[kind],
                                      dict(attributes or {}), span_links)
        return InternalSpan(self, span)

    def backend_attributes(self, backend: Backend) -> dict[str, Any]:
        found = self._backends.get(backend.name)
        if found is None:
            found = {"mcpgw.backend": backend.name}
            if isinstance(backend, HttpBackend):
                url = urlsplit(backend.url)
                found[c.NETWORK_TRANSPORT], found[c.NETWORK_PROTOCOL] = c.TCP, "http"
                if url.hostname:
                    found[c.SERVER_ADDRESS] = url.hostname
                    found[c.SERVER_PORT] = url.port or (443 if url.scheme == "https" else 80)
            else:
                found[c.NETWORK_TRANSPORT] = c.PIPE
            self._backends[backend.name] = found
        return found


class Traced:
    """A gateway span: its OTel span and the context its children start from."""

    __slots__ = ("_token", "context", "span", "traceparent", "tracing")

    def __init__(self, tracing: Tracing, span: Span) -> None:
        self.tracing, self.span = tracing, span
        self.context = _with_span(span, _EMPTY)
        self._token: contextvars.Token[Any] | None = None
        context = span.get_span_context()
        # This span's W3C traceparent (the trace id logs, metrics exemplars and audit records show).
        self.traceparent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"

    @property
    def recording(self) -> bool:
        return self.span.is_recording()

    def activate(self) -> None:
        """Make this the current span of the task (until `end`)."""
        self._token = CURRENT.set(self)

    def note(self, key: str, value: Any) -> None:
        self.span.set_attribute(key, value)

    def count(self, key: str) -> None:
        """Add one to a counter attribute (e.g. mcpgw.upstream.retries)."""
        attributes = getattr(self.span, "attributes", None) or {}
        self.span.set_attribute(key, int(attributes.get(key, 0)) + 1)

    def call(self, backend: Backend, method: str, params: dict[str, Any] | None,
             headers: dict[str, str] | None = None, *, upstream: Any = None) -> CallSpan:
        """The CLIENT span of one request to `backend`; `params._meta` (and `headers`) carry its context."""
        if not self.recording:  # sampled out: the backend hears this span's context, no span is made
            call = CallSpan(self.tracing, self.span, None)
        else:
            attributes = c.request_attributes(method, params, None)
            attributes.update(self.tracing.backend_attributes(backend))
            if upstream is not None:  # a RoutedUpstream: its breaker's state now
                attributes["mcpgw.circuit.state"] = upstream.circuit_state
            if self.tracing.config.capture_arguments and params is not None:
                attributes.update(_arguments(method, params))
            target = c.target_of(method, params)
            if target is not None:
                attributes["mcpgw.tool.original"] = target
            span = self.tracing.tracer.start_span(c.span_name(method, target), self.context, SpanKind.CLIENT,
                                                  attributes)
            call = CallSpan(self.tracing, span, self)
        call.inject(params, headers)
        return call

    def end(self) -> None:
        if self._token is not None:
            CURRENT.reset(self._token)
            self._token = None
        self.span.end()

    def fail(self, error_type: str, message: str | None = None, code: int | None = None) -> None:
        if code is not None:
            self.span.set_attribute(c.STATUS_CODE, str(code))
        self.span.set_attribute(c.ERROR_TYPE, error_type)
        self.span.set_status(Status(StatusCode.ERROR, message))


class InternalSpan(Traced):
    """A span of the gateway's own work (a round, a refresh, a reload, a JWKS fetch)."""

    __slots__ = ()

    def __enter__(self) -> InternalSpan:
        self.activate()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _tb: Any) -> None:
        if error is not None and self.span.is_recording():
            self.fail(type(error).__qualname__, str(error)[:c.MAX_VALUE_CHARS])
        self.end()


class ServerSpan(Traced):
    """The SERVER span of one request the gateway serves (`ctx.span`)."""

    __slots__ = ("failure", "method", "params", "tool_error")

    def __init__(self, tracing: Tracing, span: Span, method: str, params: Any) -> None:
        super().__init__(tracing, span)
        self.method, self.params = method, params
        self.failure: tuple[int, str] | None = None  # the JSON-RPC error the request was answered with
        self.tool_error = False

    def failed(self, code: int, message: str) -> None:
        """The request was answered with this JSON-RPC error (the dispatcher's, or the backend's)."""
        self.failure = (code, message[:c.MAX_VALUE_CHARS])

    def finish(self, ctx: RequestReport | None, http_status: int | None = None) -> None:
        """End the span with what the request turned out to be: its tenant, backend, outcome and error."""
        span = self.span
        if span.is_recording():
            if ctx is not None:
                self._describe(span, ctx)
            if self.failure is not None:
                code, message = self.failure
                span.set_attribute(c.STATUS_CODE, str(code))
                if code not in c.CALLER_CODES:
                    self.fail(str(code), message)
            elif self.tool_error:
                self.fail(c.TOOL_ERROR)
            elif http_status is not None and http_status >= 400:  # refused before any JSON-RPC answer
                span.set_attribute(c.HTTP_STATUS, http_status)
                if http_status >= 500:
                    self.fail(str(http_status))
        self.end()

    def call_client(self, method: str, params: Any) -> CallSpan:
        """The CLIENT span of a request the gateway sends its client (a relayed backend request)."""
        if not self.recording:
            return CallSpan(self.tracing, self.span, None)
        span = self.tracing.tracer.start_span(method, self.context, SpanKind.CLIENT,
                                              c.request_attributes(method, params, None))
        return CallSpan(self.tracing, span, self)

    def _describe(self, span: Span, ctx: RequestReport) -> None:
        principal = ctx.principal
        attributes: dict[str, Any] = {c.PROTOCOL_VERSION: ctx.protocol_version, "mcpgw.tenant": principal.tenant,
                                      "mcpgw.request_id": ctx.request_id, "mcpgw.outcome": ctx.outcome}
        if ctx.session_id and ctx.envelope is None:  # 2026 has no sessions
            attributes[c.SESSION_ID] = ctx.session_id
        if self.tracing.config.record_subject:
            attributes["mcpgw.subject"] = principal.subject
        if ctx.backend is not None:
            attributes["mcpgw.backend"] = ctx.backend
            target = c.target_of(self.method, self.params)  # resolved by the catalogue: low-cardinality
            if target is not None:
                span.update_name(c.span_name(self.method, target))
        if self.method in c.NAMED_METHODS or self.method in c.URI_METHODS:
            attributes["mcpgw.policy.decision"] = "allowed" if ctx.backend is not None else "not_visible"
        span.set_attributes(attributes)


class CallSpan(Traced):
    """The CLIENT span of one request to a backend (or, for a relayed request, to a client)."""

    __slots__ = ("server",)

    def __init__(self, tracing: Tracing, span: Span, server: Traced | None) -> None:
        super().__init__(tracing, span)
        self.server = server  # the span this call serves (None: sampled out, nothing to record)

    def inject(self, params: dict[str, Any] | None, headers: dict[str, str] | None) -> None:
        """This span's context into `params._meta` (a new dict: the client's stays as it came) and `headers`."""
        context = self.span.get_span_context()
        state = context.trace_state.to_header() if context.trace_state else None
        carried = TraceContext(self.traceparent, state or None)
        if params is not None:
            params["_meta"] = with_context(params.get("_meta"), carried.traceparent, carried.tracestate)
        if headers is not None:
            headers[TRACEPARENT] = carried.traceparent
            if carried.tracestate:
                headers[TRACESTATE] = carried.tracestate

    def replied(self, reply: Any) -> None:
        """End with the backend's reply: its JSON-RPC error, or an `isError` result (the server's span learns it)."""
        server = self.server
        if server is None:
            return
        error = c.error_of(reply)
        if error is not None:
            self.fail(str(error[0]), error[1], error[0])
            if isinstance(server, ServerSpan):
                server.failed(*error)
        else:
            result = reply.get("result") if type(reply) is dict else None
            if c.is_tool_error(result):
                self.fail(c.TOOL_ERROR)
                if isinstance(server, ServerSpan):
                    server.tool_error = True
            elif result is not None and self.tracing.config.capture_results:
                self.span.set_attribute(c.TOOL_RESULT, c.captured(result))
                server.note(c.TOOL_RESULT, c.captured(result))
        self.end()

    def settle(self, reply: Any, error: BaseException | None) -> None:
        """End with how the request went: the backend's reply, or why there is none (the upstream's
        reason: timeout, unavailable, circuit_open, ...; else the exception's type)."""
        if self.server is None:
            return
        if reply is not None:
            self.replied(reply)
            return
        reason = getattr(error, "reason", None)
        self.fail(str(reason) if reason is not None else type(error).__qualname__ if error else "_OTHER",
                  str(error)[:c.MAX_VALUE_CHARS] if error else None)
        self.end()

    def activate(self) -> None:
        if self.server is not None:  # sampled out: nothing to note on
            super().activate()

    def end(self) -> None:
        if self.server is not None:
            super().end()

    def relay(self, request: dict[str, Any]) -> RelaySpans:
        """The spans of a backend's request to the call's client: SERVER (from the backend), CLIENT (to the client)."""
        return RelaySpans(self, request)


class RelaySpans:
    """A backend's request relayed to its call's client: the gateway serves it (SERVER, under the backend's
    `_meta` context when it sent one, else under the call) and sends it on (CLIENT)."""

    __slots__ = ("inbound", "outbound")

    def __init__(self, call: CallSpan, request: dict[str, Any]) -> None:
        tracing, method = call.tracing, str(request.get("method"))
        params = request.get("params")
        given = of_meta(params.get("_meta")) if type(params) is dict else None
        parent = _parent_context(given) if given is not None else call.context
        links = [Link(call.span.get_span_context())] if given is not None else []
        attributes = c.request_attributes(method, params, request.get("id"))
        span = tracing.tracer.start_span(method, parent, SpanKind.SERVER, attributes, links)
        self.inbound = ServerSpan(tracing, span, method, params)
        self.outbound = self.inbound.call_client(method, params)

    def params(self, params: dict[str, Any] | None) -> dict[str, Any]:
        """The request's params for the client: a copy carrying the CLIENT span's context in `_meta`."""
        out = dict(params or {})
        self.outbound.inject(out, None)
        return out

    def end(self, outcome: str, reply: Any) -> None:
        self.inbound.note("mcpgw.outcome", outcome)
        self.outbound.replied(reply)
        if outcome != "ok":
            self.inbound.failed(*(c.error_of(reply) or (spec.INTERNAL_ERROR, outcome)))
        self.inbound.finish(None)


RequestSpan = ServerSpan | Unsampled
"""What a request the gateway serves has while tracing is on (`RequestContext.span`)."""


def remote(context: TraceContext) -> SpanContext:
    """A W3C context (already checked by `context.parsed`) as OTel's remote span context."""
    _, trace_id, span_id, flags = context.traceparent.split("-")
    state = TraceState.from_header([context.tracestate]) if context.tracestate else None
    return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16)),
                       trace_state=state)


def _parent_context(given: TraceContext | None) -> Context:
    return _with_span(NonRecordingSpan(remote(given)), _EMPTY) if given is not None else _EMPTY


def _arguments(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The opt-in content attributes of a request: a tool's arguments, a prompt's variables."""
    if method == spec.TOOLS_CALL and "arguments" in params:
        return {c.TOOL_ARGUMENTS: c.captured(params["arguments"])}
    if method == spec.PROMPTS_GET:
        return c.prompt_variables(params.get("arguments"))
    return {}
