"""What every upstream (a connection to one backend) offers the rest of the gateway.

An upstream speaks MCP to one backend on the gateway's behalf. It performs the backend
handshake itself (lazily, once per upstream session), keeps the backend's session id and
protocol version, remaps JSON-RPC ids, and hands back the backend's JSON-RPC response
object as-is. Upstream sessions are keyed by `session_key` (the tenant, or "" for the
gateway's own catalogue work) and by the relayable capabilities of the clients they serve
(`protocol.capabilities`), so that no backend session is ever shared between tenants, nor
between clients that declared different capabilities.

A backend's request made while it serves a call (sampling, elicitation, roots) goes to the
call's `on_request` handler, which answers it later; any other gets an error at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any, Final, Protocol

import structlog

from gateway.config.model import BackendConfig, default_of
from gateway.protocol import spec
from gateway.protocol.capabilities import RELAYED_METHODS, for_backend
from gateway.protocol.errors import FailureReason

JsonObject = dict[str, Any]
NotificationHandler = Callable[[JsonObject], Awaitable[None]]
ListChangedCallback = Callable[[str], Awaitable[None]]
ResourceUpdatedCallback = Callable[[str | None, JsonObject | None], None]
"""Hears a backend's notifications/resources/updated: the key of the backend session it came on (a
tenant; None for a stdio child, which serves every tenant) and its params (a string `uri` in them);
params None: that session (or child) is new, so it holds no subscriptions.
It must not block: the caller is the reader of the backend's messages."""
Answer = Callable[[JsonObject], Awaitable[None]]
"""Sends the gateway's response to one backend request back to that backend."""
RequestHandler = Callable[[JsonObject, Answer], None]
"""Takes a backend's request made during a call, and sends its response later through `Answer`.

It must not block: the caller is the reader of the backend's replies."""

_log = structlog.get_logger("gateway.upstream")

ANSWER_PARAMS = ("inputResponses", "requestState")
"""A 2026 retry's answers and state: for a 2026 backend only (a handshake-era backend asks live instead)."""


def handshake_params(params: JsonObject | None) -> JsonObject | None:
    """`params` as a handshake-era backend is sent them: never a 2026 retry's answers or state."""
    if params and ("inputResponses" in params or "requestState" in params):
        return {key: value for key, value in params.items() if key not in ANSWER_PARAMS}
    return params


class UpstreamError(Exception):
    """The backend could not produce a JSON-RPC response for this request.

    `reason` is TIMEOUT, UNAVAILABLE (connect failed, process dead, HTTP 5xx) or
    BAD_RESPONSE (garbage, wrong id, HTML page, reply over the size limit); the routing
    layer adds CIRCUIT_OPEN and OVERLOADED. The message is for logs only.

    `sent` is False only when the request certainly never reached the backend (connection
    refused, handshake failed, child not running): the one case where even a tools/call
    may be retried.
    """

    def __init__(self, reason: FailureReason | str, message: str, *, sent: bool = True) -> None:
        super().__init__(message)
        self.reason = FailureReason(reason)  # ValueError for a reason outside the tree
        self.sent = sent


class Upstream(Protocol):
    name: str
    server_capabilities: JsonObject
    """What the backend declared in its last initialize (or server/discover) result ({} before)."""
    list_ttl_ms: int | None
    """How long a 2026 backend says its lists stay fresh (the shortest `ttlMs` of its latest lists);
    None for a handshake-era backend, which gives no hints."""
    announces: bool
    """Whether the backend tells the gateway of its list changes: a handshake-era one does (on its
    streams), a 2026 one only while a listen stream of it is open; False: re-list it to know."""

    async def start(self) -> None:
        """Prepare resources (spawn the child, open the pool). Never raises for a dead backend."""

    async def request(
        self,
        method: str,
        params: JsonObject | None,
        *,
        timeout: float | None,  # noqa: ASYNC109 - the per-call budget; None: the caller bounds it
        session_key: str = "",
        headers: Mapping[str, str] | None = None,
        on_notification: NotificationHandler | None = None,
        capabilities: frozenset[str] = frozenset(),
        on_request: RequestHandler | None = None,
    ) -> JsonObject:
        """Send one request; return the backend's response object (`result` or `error`).

        `timeout` None means the caller already bounds the call (RoutedUpstream's deadline
        scope does), which spares a second timer per call.
        `headers` are extra HTTP headers for this upstream session (tenant credentials);
        stdio upstreams ignore them. `on_notification` receives notifications the backend
        sends about this request (progress), with the progress token mapped back.
        `capabilities` are the relayable flags of the client served (part of the session's key);
        `on_request` receives the backend's requests that belong to this call.
        Raises UpstreamError.
        """

    async def notify(self, method: str, params: JsonObject | None, *, session_key: str = "",
                     capabilities: frozenset[str] = frozenset()) -> None:
        """Send a notification (e.g. notifications/cancelled); best effort, never raises."""

    def on_list_changed(self, callback: ListChangedCallback) -> None:
        """Register a callback for the backend's notifications/{tools,prompts,resources}/list_changed;
        it is called with the notification's method."""

    def on_resource_updated(self, callback: ResourceUpdatedCallback) -> None:
        """Register a callback for the backend's notifications/resources/updated (resources/subscribe)."""

    async def close(self) -> None:
        """End upstream sessions and stop the child, each wait bounded."""


# --- Helpers shared by the HTTP and stdio upstreams (added with them) ---------------

MAX_RESPONSE_BYTES: int = default_of(BackendConfig, "max_response_bytes")
"""Default cap on one backend message (HTTP body, SSE event, stdio line); more is bad_response."""


def request_message(request_id: int, method: str, params: JsonObject | None) -> JsonObject:
    """A JSON-RPC request envelope (no `params` key when there are none)."""
    message: JsonObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification_message(method: str, params: JsonObject | None) -> JsonObject:
    """A JSON-RPC notification envelope."""
    message: JsonObject = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def initialize_params(protocol_version: str, client_info: Mapping[str, Any],
                      capabilities: Iterable[str] = ()) -> JsonObject:
    """The gateway's `initialize` params, declaring what it can relay for clients with `capabilities`."""
    return {
        "protocolVersion": protocol_version,
        "capabilities": for_backend(capabilities),
        "clientInfo": dict(client_info),
    }


def swap_progress_token(params: JsonObject | None, token: str) -> tuple[JsonObject | None, Any]:
    """Replace `params._meta.progressToken` by `token`; return (new params, original or None).

    Copies instead of mutating, so the caller's message stays as the client sent it.
    """
    meta = params.get("_meta") if params else None
    if not isinstance(meta, dict) or meta.get("progressToken") is None:
        return params, None
    assert params is not None
    return {**params, "_meta": {**meta, "progressToken": token}}, meta["progressToken"]


def progress_token(notification: JsonObject) -> Any:
    """The progress token of a notifications/progress message, or None."""
    params = notification.get("params")
    return params.get("progressToken") if isinstance(params, dict) else None


def restore_progress_token(notification: JsonObject, original: Any) -> JsonObject:
    """A copy of a progress notification carrying the client's own token again."""
    params = notification.get("params")
    params = params if isinstance(params, dict) else {}
    return {**notification, "params": {**params, "progressToken": original}}


def message_kind(message: Any) -> str:
    """Classify a decoded message: request, notification, response or invalid."""
    if not isinstance(message, dict):
        return "invalid"
    if isinstance(message.get("method"), str):
        return "request" if "id" in message else "notification"
    if "id" not in message:
        return "invalid"
    if "error" in message:  # passed on to clients as it is: it must be a JSON-RPC error object
        error = message["error"]
        return "response" if isinstance(error, dict) and type(error.get("code")) is int and isinstance(
            error.get("message"), str) else "invalid"
    return "response" if "result" in message else "invalid"


def check_response(backend: str, message: Any, expected_id: int) -> JsonObject:
    """Return `message` if it is the response to `expected_id`, else raise bad_response."""
    if message_kind(message) != "response":
        raise UpstreamError(FailureReason.BAD_RESPONSE, f"{backend}: not a JSON-RPC response")
    got = message["id"]
    if type(got) is not type(expected_id) or got != expected_id:
        raise UpstreamError(FailureReason.BAD_RESPONSE, f"{backend}: response id {got!r} != {expected_id}")
    return message


def negotiated_version(backend: str, reply: JsonObject) -> str:
    """The protocol version from an `initialize` reply; a refusal makes the backend unavailable."""
    result = reply.get("result")
    if not isinstance(result, dict):
        error = reply.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        raise UpstreamError(FailureReason.UNAVAILABLE, f"{backend}: initialize refused (code {code})")
    version = result.get("protocolVersion")
    if not isinstance(version, str):
        raise UpstreamError(FailureReason.BAD_RESPONSE, f"{backend}: initialize reply without protocolVersion")
    return version


def server_capabilities(reply: JsonObject) -> JsonObject:
    """The capabilities of an `initialize` reply ({} when it has none that is an object)."""
    result = reply.get("result")
    capabilities = result.get("capabilities") if isinstance(result, dict) else None
    if not isinstance(capabilities, dict):
        return {}
    extensions = capabilities.get("extensions")
    if isinstance(extensions, dict) and spec.TASKS_EXTENSION in extensions:  # a 2026 extension: not in a session
        rest = {name: value for name, value in extensions.items() if name != spec.TASKS_EXTENSION}
        capabilities = {**capabilities, "extensions": rest}
    return capabilities


def answer_backend_request(message: JsonObject, why: str = "it belongs to no request of the gateway") -> JsonObject:
    """Our reply to a backend request nobody relays: `ping` works, a relayable one is refused
    (saying `why`), anything else is -32601. Answering keeps the backend from hanging."""
    method = message.get("method")
    if method == spec.PING:
        return {"jsonrpc": "2.0", "id": message.get("id"), "result": {}}
    if method in RELAYED_METHODS:
        return refusal(message, f"{method} not relayed: {why}")
    error = {"code": spec.METHOD_NOT_FOUND, "message": f"Method not found: {str(method)[:100]}"}
    return {"jsonrpc": "2.0", "id": message.get("id"), "error": error}


def refusal(message: JsonObject, text: str) -> JsonObject:
    """An error response to a backend request (-32600, as the SDK's client answers what it does not support)."""
    return {"jsonrpc": "2.0", "id": message.get("id"), "error": {"code": spec.INVALID_REQUEST, "message": text}}


class Backoff:
    """Exponential delays for reconnects and restarts: first, doubling up to `limit`."""

    def __init__(self, first: float = 0.5, limit: float = 30.0) -> None:
        self._first, self._limit = first, limit
        self._next = first

    def next(self) -> float:
        delay, self._next = self._next, min(self._next * 2, self._limit)
        return delay

    def reset(self) -> None:
        self._next = self._first


class BackgroundTasks:
    """Fire-and-forget tasks an upstream owns: kept referenced, logged, cancelled on close."""

    def __init__(self, backend: str) -> None:
        self._backend = backend
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=f"upstream:{self._backend}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.warning(
                "upstream task failed",
                backend=self._backend,
                task=task.get_name(),
                error=repr(task.exception()),
            )

    async def cancel_all(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class ListChangedCallbacks:
    """The callbacks registered with `on_list_changed`; each firing runs them as tasks.

    Tasks, not awaits: a callback typically re-lists tools through the same upstream,
    which would deadlock a reader that waited for it.
    """

    def __init__(self, tasks: BackgroundTasks) -> None:
        self._tasks = tasks
        self._callbacks: list[ListChangedCallback] = []

    def add(self, callback: ListChangedCallback) -> None:
        self._callbacks.append(callback)

    def fire(self, method: str) -> None:
        for callback in self._callbacks:
            self._tasks.spawn(callback(method), "list_changed")


SESSION_NOTICES: Final = frozenset({spec.RESOURCES_UPDATED, spec.TASKS_STATUS})
"""Notifications about a backend session's own state (a subscribed resource, a 2025-11-25 task), not a call's:
routed by `ResourceUpdates` to whoever holds it (dispatch.subscriptions, dispatch.session_tasks)."""


class ResourceUpdates:
    """The callbacks registered with `on_resource_updated`, run at once: they only route. They hear a backend
    session's `notifications/resources/updated` and `notifications/tasks/status` (SESSION_NOTICES), by params."""

    def __init__(self) -> None:
        self._callbacks: list[ResourceUpdatedCallback] = []

    def add(self, callback: ResourceUpdatedCallback) -> None:
        self._callbacks.append(callback)

    def fire(self, session_key: str | None, message: JsonObject) -> None:
        params = message.get("params")
        if isinstance(params, dict) and (isinstance(params.get("uri"), str) or (
                message.get("method") == spec.TASKS_STATUS and isinstance(params.get("taskId"), str))):
            for callback in self._callbacks:
                callback(session_key, params)

    def started(self, session_key: str | None) -> None:
        """A backend session (or child) began: subscriptions held on its predecessor are gone."""
        for callback in self._callbacks:
            callback(session_key, None)


def subscribable(capabilities: JsonObject) -> bool:
    """Whether a backend's initialize result declared `resources.subscribe`."""
    resources = capabilities.get("resources")
    return isinstance(resources, dict) and resources.get("subscribe") is True
