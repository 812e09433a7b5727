"""Multi-round trips on the wire: the InputRequiredResult's shape, the sealed requestState (tampered,
expired, someone else's, another request's, replayed), answers that are missing or malformed, what
the client did not declare, and a round nobody retries (its backend call is cancelled)."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import orjson
import pytest
from backend_fixtures import StartBackend
from conftest import RunningGateway, StartGateway, make_config, make_token
from e2e.test_mrtr import HOLDING, raw, start
from shared_state.helpers import wait_until
from stateless_client import StatelessClient

from gateway import keys
from gateway.app import create_app
from gateway.reload import RELOADER

pytestmark = pytest.mark.timeout(120)

CAPS = "io.modelcontextprotocol/clientCapabilities"
FORM = {CAPS: {"elicitation": {"form": {}}}}
CONFIRM = {"name": "web__confirm", "arguments": {"action": "ship it"}}
ACCEPT = {"action": "accept", "content": {"confirm": True, "note": "raw"}}
INVALID_STATE = {"code": -32602, "message": "Invalid or expired requestState",
                 "data": {"reason": "invalid_request_state"}}


@pytest.fixture
async def topology(http_backend: StartBackend, gateway: StartGateway) -> dict[str, Any]:
    """test_mrtr's gateway and backends; rounds wait 3 s for a retry."""
    return await start(http_backend, gateway, round_seconds=3)


async def first_round(client: StatelessClient, params: dict[str, Any] = CONFIRM,
                      meta: dict[str, Any] = FORM) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the request, its InputRequiredResult)."""
    message = client.request("tools/call", params, **meta)
    status, body, _ = await client.post(message)
    assert status == 200, body
    assert body["result"]["resultType"] == "input_required", body
    return message, body["result"]


def retry(client: StatelessClient, message: dict[str, Any], state: Any, answers: Any,
          **changes: Any) -> dict[str, Any]:
    """The retry a client sends: a new id, the same params (or `changes`), its answers and the state."""
    params = {**message["params"], **changes, "requestState": state, "inputResponses": answers}
    return {"jsonrpc": "2.0", "id": next(client._ids), "method": message["method"], "params": params}


def answered(result: dict[str, Any], response: dict[str, Any] = ACCEPT) -> dict[str, Any]:
    return {key: response for key in result["inputRequests"]}


async def test_the_input_required_result_names_the_question_under_a_key_of_the_gateway(
        topology: dict[str, Any]) -> None:
    async with raw(topology["gateway"], make_token("acme")) as client:
        _, result = await first_round(client)
    [(key, request)] = result["inputRequests"].items()
    assert re.fullmatch(r"elicitation-\d+", key)
    assert request["method"] == "elicitation/create" and "id" not in request and "jsonrpc" not in request
    assert request["params"]["message"] == "Do you want to ship it?"
    assert request["params"]["requestedSchema"]["properties"]["confirm"]["type"] == "boolean"
    assert isinstance(result["requestState"], str) and result["requestState"].startswith("v1.")
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-gateway"
    assert "ttlMs" not in result and "cacheScope" not in result  # an InputRequiredResult is never cached


async def test_progress_reported_while_the_round_is_parked_reaches_the_retry(topology: dict[str, Any]) -> None:
    """No request waits on a parked round: the call's latest progress is kept, and the retry hears it
    first, under its own token (then the result, on the same stream)."""
    async with raw(topology["gateway"], make_token("acme")) as client:
        message, result = await first_round(client, {"name": "hold__meanwhile", "arguments": {"after": 0.3}},
                                            {**FORM, "progressToken": "first"})
        await asyncio.sleep(0.8)  # the backend reports while its question waits for the retry
        meta = {**message["params"]["_meta"], "progressToken": "retry"}
        status, body, headers = await client.post(retry(client, message, result["requestState"], answered(result),
                                                        _meta=meta))
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream"), body
    events = [orjson.loads(line[5:]) for line in body.decode().splitlines() if line.startswith("data:")]
    assert [event.get("method") for event in events] == ["notifications/progress", None]
    assert events[0]["params"] == {"progressToken": "retry", "progress": 1, "total": 2, "message": "while asking"}
    assert events[1]["result"]["content"][0]["text"] == "accept"

async def test_a_url_elicitation_goes_out_without_the_id_2026_removed(topology: dict[str, Any]) -> None:
    async with raw(topology["gateway"], make_token("acme")) as client:
        message, result = await first_round(client, {"name": "web__sign_in", "arguments": {"url": "https://a.example"}},
                                            {CAPS: {"elicitation": {"url": {}}}})
        [request] = result["inputRequests"].values()
        assert request["params"]["mode"] == "url" and request["params"]["url"] == "https://a.example"
        assert "elicitationId" not in request["params"]  # the backend's id stays with the gateway
        status, body, _ = await client.post(retry(client, message, result["requestState"],
                                                  answered(result, {"action": "accept"})))
        assert status == 200 and body["result"]["content"][0]["text"] == "accept"


async def test_a_tampered_state_is_refused_and_the_round_still_waits_for_the_genuine_one(
        topology: dict[str, Any]) -> None:
    async with raw(topology["gateway"], make_token("acme")) as client:
        message, result = await first_round(client)
        state: str = result["requestState"]
        version, payload, tag = state.split(".")
        flipped = payload[:10] + ("A" if payload[10] != "A" else "B") + payload[11:]
        for forged in (f"{version}.{flipped}.{tag}", f"{version}.{payload}.{tag[:-2]}", f"{version}.{payload}",
                       state + "x", "v2." + state[3:], "", "x" * 5000, 42):
            status, body, _ = await client.post(retry(client, message, forged, answered(result)))
            assert (status, body.get("error")) == (400, INVALID_STATE), forged
        status, body, _ = await client.post(retry(client, message, state, answered(result)))
        assert status == 200, body
        assert body["result"]["content"][0]["text"] == "confirmed=True note=raw"
        assert body["result"]["resultType"] == "complete"


async def test_a_state_binds_the_principal_the_method_the_name_and_the_arguments(topology: dict[str, Any]) -> None:
    gateway = topology["gateway"]
    async with raw(gateway, make_token("acme")) as client, \
            raw(gateway, make_token("acme", sub="mallory")) as other_subject, \
            raw(gateway, make_token("globex")) as other_tenant:
        message, result = await first_round(client)
        state, answers = result["requestState"], answered(result)
        refused = [
            (other_subject, retry(other_subject, message, state, answers)),
            (other_tenant, retry(other_tenant, message, state, answers)),
            (client, retry(client, message, state, answers, arguments={"action": "ship something else"})),
            (client, retry(client, message, state, answers, name="local__confirm")),
        ]
        for sender, forged in refused:
            status, body, _ = await sender.post(forged)
            assert (status, body.get("error")) == (400, INVALID_STATE), forged["params"]
        prompt = {**retry(client, message, state, answers), "method": "prompts/get"}  # another method, same name
        status, body, _ = await client.post(prompt)
        assert (status, body.get("error")) == (400, INVALID_STATE)
        status, body, _ = await client.post(retry(client, message, state, answers))
        assert status == 200 and body["result"]["content"][0]["text"] == "confirmed=True note=raw"


async def test_a_state_is_single_use(topology: dict[str, Any]) -> None:
    async with raw(topology["gateway"], make_token("acme")) as client:
        message, result = await first_round(client)
        genuine = retry(client, message, result["requestState"], answered(result))
        status, _, _ = await client.post(genuine)
        assert status == 200
        status, body, _ = await client.post({**genuine, "id": next(client._ids)})  # replayed
        assert (status, body.get("error")) == (400, INVALID_STATE)


async def test_a_missing_answer_is_asked_again_and_extra_ones_are_ignored(topology: dict[str, Any]) -> None:
    async with raw(topology["gateway"], make_token("acme")) as client:
        message, result = await first_round(client)
        status, body, _ = await client.post(retry(client, message, result["requestState"], {"bogus": ACCEPT}))
        assert status == 200 and body["result"]["resultType"] == "input_required"
        again = body["result"]
        assert again["inputRequests"] == result["inputRequests"]  # the same question, the same key
        assert again["requestState"] != result["requestState"]  # the next step's
        status, body, _ = await client.post(retry(client, message, again["requestState"], answered(again)))
        assert status == 200 and body["result"]["content"][0]["text"] == "confirmed=True note=raw"


async def test_malformed_answers_are_invalid_params_and_the_round_waits_on(topology: dict[str, Any]) -> None:
    async with raw(topology["gateway"], make_token("acme")) as client:
        message, result = await first_round(client)
        for bad in ([ACCEPT], "accept", {key: "accept" for key in result["inputRequests"]}):
            status, body, _ = await client.post(retry(client, message, result["requestState"], bad))
            assert status == 400 and body["error"]["code"] == -32602, bad
            assert "inputResponses" in body["error"]["message"]
        status, body, _ = await client.post(retry(client, message, result["requestState"], answered(result)))
        assert status == 200 and body["result"]["content"][0]["text"] == "confirmed=True note=raw"


async def test_a_declined_elicitation_goes_back_to_the_backend_as_it_is(topology: dict[str, Any]) -> None:
    async with raw(topology["gateway"], make_token("acme")) as client:
        message, result = await first_round(client)
        declined = answered(result, {"action": "decline"})
        status, body, _ = await client.post(retry(client, message, result["requestState"], declined))
        assert status == 200 and body["result"]["content"][0]["text"] == "decline"


@pytest.mark.parametrize("backend", ["web", "local"])
@pytest.mark.parametrize("declared", [{}, {"elicitation": {"form": {}}, "roots": {}}])
async def test_what_the_request_did_not_declare_is_refused_to_the_backend_at_once(
        topology: dict[str, Any], backend: str, declared: dict[str, Any]) -> None:
    async with raw(topology["gateway"], make_token("acme")) as client:
        started = time.perf_counter()
        body = await client.call("tools/call", {"name": f"{backend}__summarize", "arguments": {"text": "x"}},
                                 **{CAPS: declared})
        elapsed = time.perf_counter() - started
    result = body["result"]
    assert result["resultType"] == "complete" and result["isError"] is True
    text = result["content"][0]["text"]
    refused = re.search(r"sampling refused after ([\d.]+) ms: Sampling not supported", text)
    assert refused, text
    assert float(refused.group(1)) < 100  # the backend's own measure of how fast the refusal came
    assert elapsed < 10  # the call completed, no round held it
    assert len(topology["gateway"].app[keys.ROUNDS]) == 0


async def test_a_url_elicitation_for_a_client_that_declared_only_forms_is_refused(topology: dict[str, Any]) -> None:
    async with raw(topology["gateway"], make_token("acme")) as client:
        message = client.request("tools/call", {"name": "web__sign_in", "arguments": {"url": "https://a.example"}},
                                 **FORM)
        status, body, _ = await client.post(message)
    # sign_in lets the refusal escape, so the SDK backend answers its call with it: passed on as a session gets it
    assert status == 400 and body["error"]["code"] == -32600
    assert body["error"]["message"] == "Elicitation not supported: the client did not declare elicitation.url"


async def test_an_abandoned_round_cancels_the_backend_call_and_frees_its_slot(topology: dict[str, Any]) -> None:
    gateway = topology["gateway"]
    async with raw(gateway, make_token("acme")) as client:
        message, result = await first_round(client, {"name": "hold__hold", "arguments": {}})
        exchange, rounds = gateway.app[keys.EXCHANGE], gateway.app[keys.ROUNDS]
        assert len(rounds) == 1 and exchange.busy["acme"] == 1  # the held call keeps its in-flight slot
        await asyncio.sleep(3 + 1.5)  # round_seconds, and a margin
        assert len(rounds) == 0 and exchange.busy["acme"] == 0
        status, body, _ = await client.post(retry(client, message, result["requestState"], answered(result)))
        assert (status, body.get("error")) == (400, INVALID_STATE)  # expired, and its round gone
        assert await wait_until(lambda: _ended(client), within=10)
        assert await _outcomes(client) == ["cancelled"]  # told (notifications/cancelled), not left waiting


async def test_a_client_closing_the_stream_of_its_retry_cancels_the_call(topology: dict[str, Any]) -> None:
    gateway = topology["gateway"]
    async with raw(gateway, make_token("acme")) as client:
        message, result = await first_round(client, {"name": "hold__hold", "arguments": {"then_sleep": 60}})
        waiting = asyncio.create_task(client.post(retry(client, message, result["requestState"], answered(result))))
        assert await wait_until(lambda: _said(client, ["answered"]), within=10)  # the backend works on
        waiting.cancel()  # the client hangs up: at 2026 that is the cancellation
        assert await wait_until(lambda: _said(client, ["answered", "cancelled"]), within=10)
        assert len(gateway.app[keys.ROUNDS]) == 0 and gateway.app[keys.EXCHANGE].busy["acme"] == 0


async def _said(client: StatelessClient, outcomes: list[str]) -> bool:
    return await _outcomes(client) == outcomes


async def _ended(client: StatelessClient) -> bool:
    return bool(await _outcomes(client))


async def _outcomes(client: StatelessClient) -> list[str]:
    body = await client.call("tools/call", {"name": "hold__outcomes", "arguments": {}})
    return list(body["result"].get("structuredContent", {}).get("result", []))


async def test_a_held_call_outlives_a_reload_and_mrtr_keys_need_a_restart(
        http_backend: StartBackend, aiohttp_server: Any) -> None:
    hold = {"name": "hold", "transport": "stdio", "command": HOLDING}
    tenants = {"acme": {"backends": ["*"]}, "globex": {"backends": ["*"]}}
    configs = [make_config([hold], tenants=tenants, mrtr={"round_seconds": 30})]
    app = create_app(configs[0], reload_source=lambda: configs[-1])
    server = await aiohttp_server(app)
    await asyncio.wait_for(app[keys.CATALOGUE].ready.wait(), 20)
    running = RunningGateway(app, server)
    async with raw(running, make_token("acme")) as client:
        message, result = await first_round(client, {"name": "hold__hold", "arguments": {}})
        configs.append(make_config([hold], tenants={"acme": {"backends": ["*"]}}, mrtr={"round_seconds": 30}))
        assert (await app[RELOADER].reload("test")).applied  # a live change (a tenant went)
        status, body, _ = await client.post(retry(client, message, result["requestState"], answered(result)))
        assert status == 200 and body["result"]["content"][0]["text"] == "accept"
        configs.append(make_config([hold], tenants={"acme": {"backends": ["*"]}}, mrtr={"round_seconds": 5}))
        refused = await app[RELOADER].reload("test")
        assert not refused.applied and refused.reason == "mrtr.round_seconds: cannot change without a restart"
