"""A 2026 request's channel (transport.http.PostStream told its envelope): its progress and wanted logs,
never a request of ours."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.protocol.eras import Envelope
from gateway.transport.channel import ChannelClosed, PendingAsks
from gateway.transport.http.endpoint import PostStream
from gateway.transport.modern import NoBackChannel


class ListStream(PostStream):
    """A POST's channel whose client is this test: what would go on the stream is kept in a list."""

    __slots__ = ("sent",)

    def __init__(self, envelope: Envelope | None) -> None:
        super().__init__(None, PendingAsks(), "", envelope)  # type: ignore[arg-type]  # no HTTP request: send is ours
        self.sent: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)


def log(level: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": level, "data": level}}


PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}


async def test_progress_goes_through_and_logs_only_at_or_above_the_requests_level() -> None:
    channel = ListStream(Envelope("2026-07-28", {}, log_level="warning"))
    for message in (PROGRESS, log("info"), log("warning"), log("emergency"), log("bogus")):
        await channel.notify(message)
    assert [m["params"].get("level") for m in channel.sent] == [None, "warning", "emergency"]


async def test_a_request_without_a_log_level_gets_no_log_messages() -> None:
    channel = ListStream(Envelope("2026-07-28", {}))
    await channel.notify(log("emergency"))
    await channel.notify(PROGRESS)
    assert channel.sent == [PROGRESS]


async def test_a_session_request_gets_every_notification() -> None:
    channel = ListStream(None)
    await channel.notify(log("debug"))
    await channel.notify(PROGRESS)
    assert channel.sent == [log("debug"), PROGRESS]


async def test_a_2026_client_is_never_asked_anything() -> None:
    channel = ListStream(Envelope("2026-07-28", {"sampling": {}, "roots": {}}))
    with pytest.raises(NoBackChannel) as raised:
        await channel.ask("sampling/createMessage", {"messages": []}, timeout=1)
    assert isinstance(raised.value, ChannelClosed)  # what relays already answer a backend with an error for
    assert channel.sent == [] and len(channel.pending) == 0


class AnsweringStream(ListStream):
    """A session's POST channel whose client answers every request at once, with empty roots."""

    __slots__ = ()

    async def send(self, message: dict[str, Any]) -> None:
        await super().send(message)
        self.pending.answer(self.client, {"jsonrpc": "2.0", "id": message["id"], "result": {"roots": []}})


async def test_a_session_client_is_asked_and_its_answer_returned() -> None:
    channel = AnsweringStream(None)
    answer = await channel.ask("roots/list", None, timeout=5)
    asked = channel.sent[0]
    assert asked["method"] == "roots/list" and answer == {"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": []}}
    assert len(channel.pending) == 0
