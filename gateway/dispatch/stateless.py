"""What the dispatcher does differently for a 2026-07-28 request.

- Methods: the handshake-era ones minus those 2026 removed (`initialize`, `ping`, …), plus
  `server/discover`; any other is unknown (-32601).
- Client capabilities: a method may need some (`REQUIRED_CLIENT_CAPABILITIES`); a request whose
  own envelope lacks them gets -32021 naming them. Only the tasks extension's methods need one
  (its declaration): a backend's sampling, elicitation or roots request during a 2026 call is
  relayed in rounds (transport.rounds) when the request declared it, and refused at once otherwise
  (relay.py).
- Results: `resultType` and the gateway's serverInfo on every one, cache hints on list results.
  A list page the catalogue pre-encoded gets its 2026 form once per catalogue version, not per request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import orjson

from gateway.catalogue.page_cache import PageCache
from gateway.protocol import eras, spec
from gateway.protocol.eras import Envelope, JsonObject
from gateway.protocol.errors import MissingClientCapability
from gateway.protocol.jsonrpc import Message
from gateway.tenancy import RequestContext

Handler = Callable[[Message, RequestContext], Awaitable[Any]]

CACHE_TTL_MS = 5_000
"""How long a 2026 client may reuse a list or discover result. Short: a client that does not listen
(subscriptions/listen) hears of no change, and the catalogue refreshes in the background. Shorter
when a 2026 backend allows its lists less (`StatelessRules._follow`)."""

CACHE_SCOPE = "private"
"""Views are filtered per tenant, so no cache may share them across callers."""

LIST_PAGES = frozenset({spec.TOOLS_LIST, spec.PROMPTS_LIST, spec.RESOURCES_LIST, spec.RESOURCES_TEMPLATES_LIST})
"""Methods whose results the catalogue pre-encodes (gateway-built: no `_meta` of their own)."""

SELF_COMPLETING = frozenset({spec.TOOLS_CALL})
"""Methods whose handlers put their results in the 2026 form themselves, before encoding (`ToolMethods.call`)."""

REQUIRED_CLIENT_CAPABILITIES: Mapping[str, JsonObject] = {
    method: {"extensions": {spec.TASKS_EXTENSION: {}}} for method in spec.TASK_METHODS}
"""Method → the client capabilities it cannot be served without: the tasks extension's methods, its declaration."""


def no_hints() -> Iterable[int | None]:
    """No backend gives a list ttlMs: the gateway's own CACHE_TTL_MS stands."""
    return ()


class StatelessRules:
    """The dispatcher's 2026-07-28 method table, capability checks and result forms."""

    def __init__(self, *, server_info: JsonObject,
                 required: Mapping[str, JsonObject] = REQUIRED_CLIENT_CAPABILITIES,
                 backend_hints: Callable[[], Iterable[int | None]] = no_hints) -> None:
        self.server_info = orjson.Fragment(orjson.dumps(server_info))  # encoded once, not in every result
        self._server_info = server_info
        self.required = dict(required)
        self.backend_hints = backend_hints  # the backends' own list ttlMs (2026 backends; None: no hint)
        self.ttl_ms = CACHE_TTL_MS
        self._tail = eras.page_tail(server_info, CACHE_TTL_MS, CACHE_SCOPE)
        self._pages = PageCache()  # each served page's 2026 form, by the page it completes
        self._version = ""

    def methods(self, handshake: Mapping[str, Handler], discover: Handler,
                catalogue_version: Callable[[], str]) -> dict[str, Handler]:
        """The methods a 2026 request may call (exactly these, so discover's capabilities can match them),
        each answering in its 2026 form."""
        table = {method: handler for method, handler in handshake.items() if method not in eras.REMOVED_METHODS}
        table[spec.SERVER_DISCOVER] = discover
        return {method: self._completing(method, handler, catalogue_version) for method, handler in table.items()}

    def _completing(self, method: str, handler: Handler, catalogue_version: Callable[[], str]) -> Handler:
        """`handler`, checking the client capabilities its method needs and completing its result."""
        if method in SELF_COMPLETING and method not in self.required:
            return handler  # the hot path: no coroutine layer of its own

        async def completing(message: Message, ctx: RequestContext) -> Any:
            assert ctx.envelope is not None
            self.require(method, ctx.envelope)
            result = await handler(message, ctx)
            retried = isinstance(message.params, dict) and "requestState" in message.params
            return self.complete(method, result, catalogue_version(), cacheable=not retried)
        return completing

    def require(self, method: str, envelope: Envelope) -> None:
        """-32021 when the method needs a client capability this request did not declare."""
        needed = self.required.get(method)
        if needed:
            missing = eras.missing_capabilities(needed, envelope.client_capabilities)
            if missing:
                raise MissingClientCapability(missing)

    def discover(self, capabilities: Mapping[str, Any], instructions: str, *, listen: bool = False) -> JsonObject:
        """`server/discover`: the versions served, and what this tenant is served at 2026 (change
        notifications only when `subscriptions/listen` is served)."""
        return {"supportedVersions": list(eras.SERVED_VERSIONS),
                "capabilities": eras.stateless_capabilities(capabilities, listen=listen),
                "instructions": instructions}

    def complete(self, method: str, result: Any, catalogue_version: str, *, cacheable: bool = True) -> Any:
        """A handler's result in its 2026 form; `cacheable` False (a multi-round retry's): ttlMs 0.

        A pre-encoded result of another method than a list is a backend's reply: decoded, completed
        and encoded again (a tools/call's, the hot one, is completed by its handler: SELF_COMPLETING).
        """
        self._follow(catalogue_version)
        if isinstance(result, orjson.Fragment):
            if method in LIST_PAGES:
                return self._page(result)
            result = orjson.loads(orjson.dumps(result))
        if not cacheable and method in eras.CACHEABLE:
            result = {**result, "ttlMs": 0, "cacheScope": CACHE_SCOPE}
        return self.completed(method, result)

    def passed_error(self, error: orjson.Fragment) -> Any:
        """A backend's own error as a 2026 client gets it: decoded (its code sets the HTTP status), and
        -32002 (resource not found, which 2026 no longer has) as -32602."""
        decoded = orjson.loads(orjson.dumps(error))
        if isinstance(decoded, dict) and decoded.get("code") == spec.RESOURCE_NOT_FOUND:
            decoded["code"] = spec.INVALID_PARAMS
        return decoded

    def completed(self, method: str, result: JsonObject) -> JsonObject:
        if method in eras.CACHEABLE and "ttlMs" not in result:
            result = {**result, "ttlMs": self.ttl_ms, "cacheScope": CACHE_SCOPE}
        return eras.completed(result, self.server_info)

    def _follow(self, catalogue_version: str) -> None:
        """A new catalogue version drops the old pages (gone from the views too); the TTL is the
        shortest a backend allows, never longer than the gateway's own."""
        ttl_ms = min((hint for hint in self.backend_hints() if hint is not None), default=CACHE_TTL_MS)
        ttl_ms = max(0, min(ttl_ms, CACHE_TTL_MS))
        if catalogue_version != self._version or ttl_ms != self.ttl_ms:
            self._version, self.ttl_ms = catalogue_version, ttl_ms
            self._pages.clear()
            self._tail = eras.page_tail(self._server_info, ttl_ms, CACHE_SCOPE)

    def _page(self, page: orjson.Fragment) -> orjson.Fragment:
        done = self._pages.get(page)
        return done if done is not None else self._pages.put(page, orjson.dumps(page)[:-1] + self._tail)
