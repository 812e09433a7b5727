"""A backend that serves both eras is reached in the era of each client, as a direct connection would be.

The official SDK serves both eras from one app (era_backend.py `--era both`), and tools written for
one era work only in it: `confirm` asks with `ctx.elicit()` (a live request, handshake era), `pick`
returns an `InputRequiredResult` (2026). With the default `protocol: auto`, a session client's call
goes through a backend session and a 2026 client's at 2026, so each client gets exactly what it gets
from the backend directly, failures included.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import RunningGateway, StartGateway, make_config
from mcp.shared.exceptions import MCPError
from mcp.types import ElicitResult
from test_upstream_eras import EraBackend, client

from gateway import keys

pytestmark = pytest.mark.timeout(120)

MODES = ["auto", "legacy"]


@pytest.fixture(scope="module")
async def dual() -> AsyncIterator[EraBackend]:
    backend = EraBackend("both")
    await backend.start()
    yield backend
    await backend.stop()


@pytest.fixture
async def running(dual: EraBackend, gateway: StartGateway) -> RunningGateway:
    return await gateway(make_config([{"name": "dual", "transport": "http", "url": dual.url}]))


class Answers:
    """The user's side: confirms the topic `owls`, picks the color `teal`."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def elicitation(self, context: Any, params: Any) -> ElicitResult:
        self.asked.append(params.message)
        return ElicitResult(action="accept", content={"topic": "owls", "color": "teal"})


async def outcome(url: str, mode: str, tool: str, *, direct: bool = False) -> tuple[str, list[str]]:
    """What a client of `mode` gets from `tool`: its text or its error's message, and what it was asked."""
    answers = Answers()
    async with client(url, mode, token=not direct, elicitation_callback=answers.elicitation) as sdk:
        try:
            result = await sdk.call_tool(tool, {"topic": "cats"} if tool.endswith("confirm") else {})
        except MCPError as exc:
            return f"error {exc.error.code}: {exc.error.message}", answers.asked
    return ("error: " if result.is_error else "") + " ".join(b.text for b in result.content), answers.asked


async def test_the_backend_is_found_to_serve_both_eras(running: RunningGateway) -> None:
    async with client(running.url, "legacy") as sdk:
        await sdk.list_tools()
    upstream = running.app[keys.POOL].get("dual").inner
    assert upstream.eras == ("handshake", "2026")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", ["confirm", "pick"])
async def test_each_client_gets_what_it_gets_directly(running: RunningGateway, dual: EraBackend,
                                                      mode: str, tool: str) -> None:
    direct = await outcome(dual.url, mode, tool, direct=True)
    through = await outcome(running.url, mode, f"dual__{tool}")
    assert through == direct
    works = (tool == "confirm") == (mode == "legacy")  # each tool in the era it was written for
    assert not direct[0].startswith("error") if works else direct[0].startswith("error"), direct


async def test_a_2026_clients_round_reaches_the_backend_with_its_own_state(running: RunningGateway) -> None:
    """The backend's InputRequiredResult went to the client (its key and message as made), and the retry
    brought the backend its own requestState back, through the gateway's seal."""
    text, asked = await outcome(running.url, "auto", "dual__pick")
    assert (text, asked) == ("asked-color: teal", ["Which color?"])
