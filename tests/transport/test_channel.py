"""gateway.transport.channel: the gateway's requests to a client, matched to the answers that come back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.transport.channel import ASK_ID_PREFIX, ChannelClosed, ClientChannel, PendingAsks


class ListChannel(ClientChannel):
    """A channel whose client is this test: sent messages are kept in a list."""

    __slots__ = ("sent",)

    def __init__(self, pending: PendingAsks, client: str) -> None:
        super().__init__(pending, client)
        self.sent: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)


async def _answered(channel: ListChannel, answer: dict[str, Any]) -> dict[str, Any]:
    asking = asyncio.create_task(channel.ask("roots/list", None, timeout=5))
    await asyncio.sleep(0)
    request = channel.sent[-1]
    assert channel.pending.answer(channel.client, {"jsonrpc": "2.0", "id": request["id"], **answer})
    return await asking


async def test_an_ask_sends_a_request_with_a_gateway_id_and_returns_the_clients_answer() -> None:
    channel = ListChannel(PendingAsks(), "session-1")
    reply = await _answered(channel, {"result": {"roots": []}})
    assert reply["result"] == {"roots": []}
    request = channel.sent[0]
    assert request["method"] == "roots/list" and "params" not in request
    assert request["id"].startswith(ASK_ID_PREFIX)
    assert len(channel.pending) == 0


async def test_an_error_answer_is_returned_as_the_clients_message() -> None:
    channel = ListChannel(PendingAsks(), "s")
    reply = await _answered(channel, {"error": {"code": -1, "message": "no"}})
    assert reply["error"]["message"] == "no"


async def test_answers_only_reach_asks_of_the_same_client() -> None:
    pending = PendingAsks()
    mine, other = ListChannel(pending, "mine"), ListChannel(pending, "other")
    asking = asyncio.create_task(mine.ask("roots/list", {}, timeout=5))
    await asyncio.sleep(0)
    forged = {"jsonrpc": "2.0", "id": mine.sent[0]["id"], "result": {}}
    assert not pending.answer(other.client, forged)  # another session cannot answer for this one
    assert pending.answer(mine.client, forged)
    assert (await asking)["result"] == {}


async def test_an_unanswered_ask_times_out_and_is_forgotten() -> None:
    channel = ListChannel(PendingAsks(), "s")
    with pytest.raises(TimeoutError):
        await channel.ask("sampling/createMessage", {"messages": []}, timeout=0.05)
    assert len(channel.pending) == 0
    late = {"jsonrpc": "2.0", "id": channel.sent[0]["id"], "result": {}}
    assert not channel.pending.answer("s", late)


async def test_a_client_that_goes_away_fails_its_waiting_asks_at_once() -> None:
    channel = ListChannel(PendingAsks(), "s")
    asking = asyncio.create_task(channel.ask("elicitation/create", {}, timeout=30))
    await asyncio.sleep(0)
    channel.pending.abandon("s")
    with pytest.raises(ChannelClosed):
        await asking


async def test_a_channel_that_cannot_send_fails_the_ask_without_waiting() -> None:
    class Closed(ClientChannel):
        async def send(self, message: dict[str, Any]) -> None:
            raise ChannelClosed("gone")

    pending = PendingAsks()
    with pytest.raises(ChannelClosed):
        await Closed(pending, "s").ask("roots/list", None, timeout=30)
    assert len(pending) == 0


async def test_an_ask_given_up_is_withdrawn_from_the_client() -> None:
    channel = ListChannel(PendingAsks(), "s")
    with pytest.raises(TimeoutError):
        await channel.ask("elicitation/create", {}, timeout=0.05)
    asking = asyncio.create_task(channel.ask("sampling/createMessage", {}, timeout=30))
    await asyncio.sleep(0)
    asking.cancel()  # the call it served ended
    with pytest.raises(asyncio.CancelledError):
        await asking
    await asyncio.sleep(0.01)
    requests = [m for m in channel.sent if "id" in m]
    withdrawn = [m for m in channel.sent if m.get("method") == "notifications/cancelled"]
    assert [m["params"]["requestId"] for m in withdrawn] == [r["id"] for r in requests]
