"""gateway.transport.modern.StatelessChannel: a 2026 request's progress and wanted logs, never a request of ours."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.protocol.eras import Envelope
from gateway.transport.channel import ChannelClosed, ClientChannel, PendingAsks
from gateway.transport.modern import NoBackChannel, StatelessChannel


class ListChannel(ClientChannel):
    """The transport's own channel, whose client is this test: sent messages are kept in a list."""

    __slots__ = ("sent",)

    def __init__(self) -> None:
        super().__init__(PendingAsks(), "")
        self.sent: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)


def log(level: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": level, "data": level}}


PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}


async def test_progress_goes_through_and_logs_only_at_or_above_the_requests_level() -> None:
    inner = ListChannel()
    channel = StatelessChannel(inner, Envelope("2026-07-28", {}, log_level="warning"))
    for message in (PROGRESS, log("info"), log("warning"), log("emergency"), log("bogus")):
        await channel.notify(message)
    assert [m["params"].get("level") for m in inner.sent] == [None, "warning", "emergency"]


async def test_a_request_without_a_log_level_gets_no_log_messages() -> None:
    inner = ListChannel()
    channel = StatelessChannel(inner, Envelope("2026-07-28", {}))
    await channel.notify(log("emergency"))
    await channel.notify(PROGRESS)
    assert inner.sent == [PROGRESS]


async def test_a_2026_client_is_never_asked_anything() -> None:
    inner = ListChannel()
    channel = StatelessChannel(inner, Envelope("2026-07-28", {"sampling": {}, "roots": {}}))
    with pytest.raises(NoBackChannel) as raised:
        await channel.ask("sampling/createMessage", {"messages": []}, timeout=1)
    assert isinstance(raised.value, ChannelClosed)  # what relays already answer a backend with an error for
    assert inner.sent == [] and len(inner.pending) == 0
