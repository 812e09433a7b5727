"""A 2026 backend's `InputRequiredResult`, answered by the client of the call, then retried.

A 2026 backend that needs the client (sampling, elicitation, roots) during tools/call,
prompts/get or resources/read does not send it requests: it answers `resultType:
"input_required"` with `inputRequests` (key -> {method, params}) and an opaque `requestState`.
The gateway turns each input request into a real request for the call's client, through the
call's `on_request` handler (relay.py: capability check, the client's channel, its timeout),
then sends the backend the same request again with `inputResponses` and the `requestState`
byte for byte (a new JSON-RPC id). At most MAX_ROUNDS rounds; a round with only a state waits
a little and retries. A question the client cannot answer (no relay, undeclared capability,
no reply in time) ends the call with a JSON-RPC error naming it: no result can be made up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final

from gateway.protocol import spec
from gateway.protocol.capabilities import RELAYED_METHODS, TASKS, WITH_TASKS
from gateway.upstream.base import JsonObject, RequestHandler
from gateway.upstream.modern import is_input_required

MAX_ROUNDS: Final = 10
"""Retries with answers before the call fails (as the official SDK's client caps them)."""
STATE_ONLY_DELAYS: Final = (0.05, 0.1, 0.25)
"""Waits before retrying a round that asked nothing (only `requestState`), growing."""

Send = Callable[[JsonObject], Awaitable[JsonObject]]


class Unanswerable(Exception):
    """An input request the call's client cannot answer; `error` is the call's JSON-RPC error."""

    def __init__(self, error: JsonObject) -> None:
        super().__init__(error["message"])
        self.error = error


async def settle(send: Send, params: JsonObject, on_request: RequestHandler | None) -> JsonObject:
    """Send the request, answer input rounds through `on_request`, return the final reply.

    A handler that `passes_input_required` (a 2026 client's) gets the backend's InputRequiredResult
    as it is, keys and `requestState` untouched: its client answers and retries by itself."""
    reply = await send(params)
    if getattr(on_request, "passes_input_required", False):
        return reply
    for round_ in range(MAX_ROUNDS):
        if not is_input_required(reply):
            return reply
        result = reply["result"]
        requests = result.get("inputRequests")
        try:
            answers = await _answers(requests, on_request) if requests else None
        except Unanswerable as exc:
            return {"jsonrpc": "2.0", "id": reply.get("id"), "error": exc.error}
        if answers is None:
            await asyncio.sleep(STATE_ONLY_DELAYS[min(round_, len(STATE_ONLY_DELAYS) - 1)])
        reply = await send(_retry(params, answers, result.get("requestState")))
    if not is_input_required(reply):
        return reply
    error = {"code": spec.INTERNAL_ERROR, "message": f"Backend still needed input after {MAX_ROUNDS} rounds"}
    return {"jsonrpc": "2.0", "id": reply.get("id"), "error": error}


def answering(on_request: RequestHandler | None, flags: frozenset[str]) -> frozenset[str]:
    """What a 2026 backend may ask the call's client: its own declaration when it answers
    InputRequiredResult itself, else the relayable `flags` of its session; and the tasks extension
    when the forwarder relays tasks for this call."""
    if getattr(on_request, "passes_input_required", False):
        own = frozenset(getattr(on_request, "declared", flags))
        return own | WITH_TASKS if TASKS in flags else own  # the forwarder decided the tasks extension
    return flags


def _retry(params: JsonObject, answers: JsonObject | None, state: Any) -> JsonObject:
    retry = dict(params)
    if answers is not None:
        retry["inputResponses"] = answers
    if state is not None:
        retry["requestState"] = state
    return retry


async def _answers(requests: Any, on_request: RequestHandler | None) -> JsonObject:
    """Every input request asked at once; their results by key."""
    if not isinstance(requests, dict):
        raise Unanswerable(_error(spec.INVALID_REQUEST, "Backend sent malformed inputRequests"))
    keys = list(requests)
    results = await asyncio.gather(*(_ask(key, requests[key], on_request) for key in keys))
    return dict(zip(keys, results, strict=True))


async def _ask(key: str, request: Any, on_request: RequestHandler | None) -> JsonObject:
    method = request.get("method") if isinstance(request, dict) else None
    if method not in RELAYED_METHODS:
        raise Unanswerable(_error(spec.INVALID_REQUEST, f"Backend asked the client an unknown {str(method)[:60]}"))
    if on_request is None:
        raise Unanswerable(_error(spec.INVALID_REQUEST, f"{method} cannot reach the client of this call"))
    answered: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()

    async def answer(response: JsonObject) -> None:
        if not answered.done():
            answered.set_result(response)

    params = request.get("params")
    on_request({"jsonrpc": "2.0", "id": f"input-{key}", "method": method,
                **({"params": params} if isinstance(params, dict) else {})}, answer)
    response = await answered  # the relay always answers: the client's result, or an error in time
    if isinstance(response.get("result"), dict):
        return response["result"]
    error = response.get("error")
    why = error.get("message") if isinstance(error, dict) else None
    raise Unanswerable(_error(spec.INVALID_REQUEST, f"{method} for the backend failed: {str(why)[:200]}"))


def _error(code: int, message: str) -> JsonObject:
    return {"code": code, "message": message}
