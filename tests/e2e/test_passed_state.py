"""A 2026 backend's InputRequiredResult, passed through to a 2026 client: its keys as the backend made
them, its requestState inside the gateway's seal. The retry reaches that backend with the backend's
own state byte for byte; a tampered, misdirected or someone else's state never reaches any backend,
and a handshake-era backend never sees answers or states."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from conftest import RunningGateway, StartGateway, http_backend_config, make_config, make_token
from stateless_client import StatelessClient
from upstream.test_http_eras import EraFake

pytestmark = pytest.mark.timeout(60)

FORM = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
ASKED = {"ask": {"method": "elicitation/create", "params": {"message": "Region?", "requestedSchema": {
    "type": "object", "properties": {"region": {"type": "string"}}}}}}
ANSWERS = {"ask": {"action": "accept", "content": {"region": "alps"}}}
CALL = {"name": "m__locate", "arguments": {"topic": "zürich"}}  # not the header-mirrored `region`
INVALID_STATE = {"code": -32602, "message": "Invalid or expired requestState",
                 "data": {"reason": "invalid_request_state"}}


def asking(state: str | None) -> Any:
    """A 2026 tool that asks once (answering with `state`, if any), then echoes what it got."""
    def result(body: dict[str, Any]) -> dict[str, Any]:
        params = body["params"]
        if "inputResponses" not in params:
            return {"resultType": "input_required", "inputRequests": ASKED,
                    **({"requestState": state} if state is not None else {})}
        text = f"{params['inputResponses']['ask']['content']['region']} / {params.get('requestState')}"
        return {"resultType": "complete", "content": [{"type": "text", "text": text}]}
    return result


@pytest.fixture
async def backends(aiohttp_server: Any) -> dict[str, EraFake]:
    made = {"m": EraFake("2026"), "h": EraFake("handshake")}
    for backend in made.values():
        backend.url = str((await aiohttp_server(backend.app)).make_url("/mcp"))
    return made


@pytest.fixture
async def running(backends: dict[str, EraFake], gateway: StartGateway) -> RunningGateway:
    return await gateway(make_config([http_backend_config(name, fake.url, protocol=fake.era)
                                      for name, fake in backends.items()]))


@pytest.fixture
async def raw(running: RunningGateway) -> AsyncIterator[StatelessClient]:
    async with aiohttp.ClientSession() as session:
        yield StatelessClient(session, running.url, make_token("acme"))


def calls(fake: EraFake) -> list[dict[str, Any]]:
    return [body["params"] for _, body in fake.posts if body.get("method") == "tools/call"]


async def first(raw: StatelessClient, params: dict[str, Any] = CALL) -> tuple[dict[str, Any], dict[str, Any]]:
    message = raw.request("tools/call", params, **FORM)
    body = await raw.call("tools/call", params, **FORM)
    assert body["result"]["resultType"] == "input_required", body
    return message, body["result"]


async def retry(raw: StatelessClient, message: dict[str, Any], state: Any, **changes: Any) -> dict[str, Any]:
    params = {**message["params"], **changes, "inputResponses": ANSWERS, "requestState": state}
    message = {"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": params}
    _, body, _ = await raw.post(message)
    return body


@pytest.mark.parametrize("state", ["opaque/1+ü", None])
async def test_the_backend_gets_its_own_state_back_and_the_client_only_the_sealed_one(
        backends: dict[str, EraFake], raw: StatelessClient, state: str | None) -> None:
    backends["m"].result = asking(state)
    message, result = await first(raw)
    assert result["inputRequests"] == ASKED  # the backend's keys, untouched
    assert result["requestState"].startswith("v1.") and "opaque" not in result["requestState"]
    body = await retry(raw, message, result["requestState"])
    assert body["result"]["content"] == [{"type": "text", "text": f"alps / {state}"}]
    retried = calls(backends["m"])[-1]
    assert retried.get("requestState", "(none)") == (state or "(none)")  # none given: none sent back
    assert retried["inputResponses"] == ANSWERS


async def test_a_tampered_misdirected_or_foreign_state_reaches_no_backend(
        backends: dict[str, EraFake], raw: StatelessClient, running: RunningGateway) -> None:
    backends["m"].result = asking("opaque")
    message, result = await first(raw)
    sealed: str = result["requestState"]
    head, payload, tag = sealed.split(".")
    tampered = f"{head}.{payload[:-2]}{'A' if payload[-2] != 'A' else 'B'}{payload[-1]}.{tag}"
    seen = len(calls(backends["m"]))
    assert (await retry(raw, message, tampered))["error"] == INVALID_STATE
    assert (await retry(raw, message, "opaque"))["error"] == INVALID_STATE  # the backend's own, unsealed
    assert (await retry(raw, message, sealed, arguments={"topic": "bern"}))["error"] == INVALID_STATE
    assert (await retry(raw, message, sealed, name="h__locate"))["error"] == INVALID_STATE
    async with aiohttp.ClientSession() as session:
        other = StatelessClient(session, running.url, make_token("acme", sub="mallory"))
        assert (await retry(other, message, sealed))["error"] == INVALID_STATE
    assert len(calls(backends["m"])) == seen
    assert all("inputResponses" not in params and "requestState" not in params for params in calls(backends["h"]))
    body = await retry(raw, message, sealed)  # the genuine state still works
    assert body["result"]["content"] == [{"type": "text", "text": "alps / opaque"}]


async def test_a_handshake_backend_never_sees_a_retrys_answers_or_state(
        backends: dict[str, EraFake], raw: StatelessClient) -> None:
    params = {"name": "h__locate", "arguments": {}}
    body = await raw.call("tools/call", {**params, "inputResponses": ANSWERS}, **FORM)
    assert "result" in body, body
    assert calls(backends["h"]) and all(set(call) <= {"name", "arguments", "_meta"} for call in calls(backends["h"]))
