"""Backends of either protocol era behind one gateway, and clients of either era in front of it.

Four backends run the same official-SDK server (era_backend.py): a 2026-only one and a
handshake-only one over HTTP, and the same code as stdio children, one pinned to each era
(`protocol` in their config; an SDK stdio server takes the era of its first request). The SDK
client meets them through the gateway at 2026-07-28 (`mode="auto"`) and in a session
(`mode="legacy"`): tools, prompts, resources, completions, progress, logging, and a sampling
plus elicitation round must give what the same server gives a client directly. The round's
handshake-client x 2026-backend path is the gateway's input rounds; 2026 client x handshake
backend, its multi-round trips (transport/rounds.py); 2026 client x 2026 backend passes the
backend's InputRequiredResult through to the SDK client's own driver, its requestState sealed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import pytest
from backend_fixtures import HOST, free_port, stop_process
from conftest import RunningGateway, StartGateway, make_config, make_token
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp.types import CreateMessageResult, ElicitResult, PromptReference, TextContent
from shared_state.helpers import GetStream
from stateless_client import StatelessClient
from upstream.test_http_eras import EraFake

from gateway import keys

pytestmark = pytest.mark.timeout(180)

SCRIPT = str(Path(__file__).with_name("era_backend.py"))
MODES = ["auto", "legacy"]
BACKENDS = {"mh": "2026", "ch": "handshake", "ms": "2026", "cs": "handshake"}
"""Gateway backend name -> the era it speaks: `m`odern or `c`lassic, over `h`ttp or `s`tdio."""
START_SECONDS = 20.0
ANNOUNCED = 1.5
"""Seconds a list change may take to reach a listening client (the conformance suite's window)."""


@dataclass
class EraBackend:
    """era_backend.py serving HTTP on a fixed port (restartable there as another era)."""

    era: str
    silent: bool = False  # built without subscriptions/listen
    port: int = field(default_factory=free_port)
    process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/mcp"

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, SCRIPT, "--era", self.era, "--transport", "http", "--port", str(self.port),
            *(["--silent"] if self.silent else []),
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        deadline = asyncio.get_running_loop().time() + START_SECONDS
        while asyncio.get_running_loop().time() < deadline:
            try:
                _, writer = await asyncio.open_connection(HOST, self.port)
            except OSError:
                await asyncio.sleep(0.1)
                continue
            writer.close()
            return
        raise AssertionError(f"era backend ({self.era}) did not listen on {self.port}")

    async def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            await stop_process(process)


@pytest.fixture
async def era_backends() -> AsyncIterator[dict[str, EraBackend]]:
    started = {"mh": EraBackend("2026"), "ch": EraBackend("handshake")}
    try:
        await asyncio.gather(*(backend.start() for backend in started.values()))
        yield started
    finally:
        await asyncio.gather(*(backend.stop() for backend in started.values()))


def backend_configs(http: dict[str, EraBackend]) -> list[dict[str, Any]]:
    stdio = [sys.executable, SCRIPT, "--transport", "stdio"]
    return [{"name": "mh", "transport": "http", "url": http["mh"].url},
            {"name": "ch", "transport": "http", "url": http["ch"].url},
            {"name": "ms", "transport": "stdio", "command": stdio, "protocol": "2026"},
            {"name": "cs", "transport": "stdio", "command": stdio, "protocol": "handshake"}]


@pytest.fixture
async def running(era_backends: dict[str, EraBackend], gateway: StartGateway) -> RunningGateway:
    return await gateway(make_config(backend_configs(era_backends)))


class Answers:
    """The client's side of a sampling and elicitation round, recorded."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.logs: list[str] = []

    async def sampling(self, context: Any, params: Any) -> CreateMessageResult:
        self.asked.append("sampling")
        prompt = params.messages[0].content.text
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=f"[{prompt}]"),
                                   model="test")

    async def elicitation(self, context: Any, params: Any) -> ElicitResult:
        self.asked.append("elicitation")
        return ElicitResult(action="accept", content={"topic": "owls"})

    async def logging(self, params: Any) -> None:
        self.logs.append(str(params.data))

    def callbacks(self) -> dict[str, Any]:
        return {"sampling_callback": self.sampling, "elicitation_callback": self.elicitation,
                "logging_callback": self.logging}


@asynccontextmanager
async def client(url: str, mode: str, answers: Answers | None = None, token: bool = True,
                 **extra: Any) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {make_token('acme')}"} if token else {}
    callbacks = answers.callbacks() if answers else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, read_timeout_seconds=30, **callbacks, **extra) as sdk:  # type: ignore[arg-type]
            yield sdk


async def test_each_backend_is_spoken_to_in_its_own_era(running: RunningGateway) -> None:
    pool = running.app[keys.POOL]
    async with client(running.url, "legacy") as sdk:
        await sdk.list_tools()
    eras = {name: pool.get(name).inner for name in BACKENDS}
    assert eras["mh"]._era == "2026" and eras["ch"]._era == "handshake"
    assert eras["ms"]._modern and not eras["cs"]._modern


@pytest.mark.parametrize("mode", MODES)
async def test_the_catalogue_mixes_both_eras(running: RunningGateway, era_backends: dict[str, EraBackend],
                                             mode: str) -> None:
    async with client(era_backends["mh"].url, "auto", token=False) as direct:
        expected = {t.name: t.input_schema for t in (await direct.list_tools()).tools}
    async with client(running.url, mode) as sdk:
        listed = {t.name: t.input_schema for t in (await sdk.list_tools()).tools}
        prompts = {p.name for p in (await sdk.list_prompts()).prompts}
    for backend in BACKENDS:
        assert {name: listed[f"{backend}__{name}"] for name in expected} == expected
        assert f"{backend}__greet" in prompts


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_tools_prompts_resources_and_completions(
        running: RunningGateway, era_backends: dict[str, EraBackend], mode: str, backend: str) -> None:
    source = era_backends["mh" if BACKENDS[backend] == "2026" else "ch"]
    async with client(source.url, "auto", token=False) as direct, client(running.url, mode) as sdk:
        call = await sdk.call_tool(f"{backend}__add", {"a": 2, "b": 3})
        assert call.structured_content == (await direct.call_tool("add", {"a": 2, "b": 3})).structured_content == {
            "result": 5.0}
        located = await sdk.call_tool(f"{backend}__locate", {"region": "zürich", "count": 4})
        assert located.content == (await direct.call_tool("locate", {"region": "zürich", "count": 4})).content
        prompt = await sdk.get_prompt(f"{backend}__greet", {"name": "ada"})
        assert prompt.messages == (await direct.get_prompt("greet", {"name": "ada"})).messages
        uris = [str(r.uri) for r in (await sdk.list_resources()).resources]
        note = next(uri for uri in uris if uri.startswith(f"{backend}+"))
        read = await sdk.read_resource(note)
        assert [c.text for c in read.contents] == [c.text for c in (await direct.read_resource("memo://note")).contents]
        keyed = await sdk.read_resource(f"{backend}+memo://notes/7")
        assert [c.text for c in keyed.contents] == ["note 7"]
        done = await sdk.complete(PromptReference(type="ref/prompt", name=f"{backend}__greet"), {"name": "name",
                                                                                                "value": "a"})
        assert done.completion.values == ["ada", "alan"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_progress_and_logging_reach_the_caller(running: RunningGateway, mode: str, backend: str) -> None:
    progress: list[tuple[float, float | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total))

    answers = Answers()
    extra = {"log_level": "info"} if mode == "auto" else {}
    async with client(running.url, mode, answers, **extra) as sdk:
        if mode == "legacy":
            await sdk.set_logging_level("info")
        result = await sdk.call_tool(f"{backend}__slow", {"steps": 3}, progress_callback=on_progress)
    assert not result.is_error
    assert progress == [(1, 3), (2, 3), (3, 3)]
    await asyncio.sleep(0.2)  # a log line may trail the result on its own stream
    assert "slow finished 3 steps" in answers.logs


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_sampling_and_elicitation_round(
        running: RunningGateway, era_backends: dict[str, EraBackend], mode: str, backend: str) -> None:
    answers, direct_answers = Answers(), Answers()
    source = era_backends["mh" if BACKENDS[backend] == "2026" else "ch"]
    async with client(source.url, "auto", direct_answers, token=False) as direct:
        expected = await direct.call_tool("ask", {"topic": "cats"})
    async with client(running.url, mode, answers) as sdk:
        result = await sdk.call_tool(f"{backend}__ask", {"topic": "cats"})
    assert not result.is_error, result.content
    assert result.content == expected.content
    assert [block.text for block in result.content] == ["owls: [write about owls]"]
    assert answers.asked == direct_answers.asked == ["elicitation", "sampling"]


@pytest.mark.parametrize("backend", ["mh", "ms"])
async def test_a_client_that_cannot_answer_gets_a_clean_error(running: RunningGateway, backend: str) -> None:
    """The gateway declares to a 2026 backend only what the call's client declared: nothing here."""
    async with client(running.url, "legacy") as sdk:  # no callbacks: no sampling, no elicitation declared
        with pytest.raises(MCPError) as raised:
            await sdk.call_tool(f"{backend}__ask", {"topic": "cats"})
    assert "did not declare the form elicitation capability" in raised.value.error.message


async def test_a_backend_restarted_as_the_other_era_keeps_serving(gateway: StartGateway) -> None:
    """The era is kept per backend, and found again when the backend comes back as the other era."""
    backend = EraBackend("handshake")
    await backend.start()
    try:
        running = await gateway(make_config([{"name": "flip", "transport": "http", "url": backend.url}]))
        upstream = running.app[keys.POOL].get("flip").inner
        for era in ("handshake", "2026", "handshake"):
            if era != backend.era:
                await backend.stop()
                backend.era = era
                await backend.start()
            async with client(running.url, "legacy") as sdk:
                result = await sdk.call_tool("flip__add", {"a": 1, "b": 2})
            assert result.structured_content == {"result": 3.0}
            assert upstream._era == era
    finally:
        await backend.stop()


@pytest.mark.parametrize(("ttl_ms", "refreshes"), [(1000, range(2, 5)), (0, range(0, 1)), (120_000, range(0, 1))])
async def test_the_catalogue_refreshes_a_2026_backend_when_its_lists_go_stale(
        aiohttp_server: Any, gateway: StartGateway, ttl_ms: int, refreshes: range) -> None:
    """A hint shorter than refresh_seconds brings the next refresh forward (never sooner than 1 s);
    0 (keep nothing) and a hint past the periodic refresh leave the periodic refresh alone."""
    fake = EraFake("2026")
    fake.list_ttl = ttl_ms
    fake.url = str((await aiohttp_server(fake.app)).make_url("/mcp"))
    await gateway(make_config([{"name": "hinted", "transport": "http", "url": fake.url}],
                              catalogue={"refresh_seconds": 60}))
    first = fake.methods().count("tools/list")  # one refresh: its plain list and its capability probe
    await asyncio.sleep(3.2)
    assert (fake.methods().count("tools/list") - first) / first in refreshes


async def test_a_2026_clients_task_param_never_reaches_a_backend(aiohttp_server: Any, gateway: StartGateway) -> None:
    """2026 removed `task`; a handshake backend given one could answer a task nobody asked for
    (tools/call forwards only name, arguments and `_meta`: this keeps it so)."""
    fake = EraFake("handshake")
    fake.url = str((await aiohttp_server(fake.app)).make_url("/mcp"))
    running = await gateway(make_config([{"name": "old", "transport": "http", "url": fake.url}]))
    async with aiohttp.ClientSession() as session:
        modern = StatelessClient(session, running.url, make_token("acme"))
        request = modern.request("tools/call", {"name": "old__locate", "arguments": {"region": "x"},
                                                "task": {"ttl": 60_000}})
        status, body, _ = await modern.post(request, Mcp_Param_Region="x")
    assert status == 200, body
    assert body["result"]["resultType"] == "complete"
    calls = [params for _, sent in fake.posts if sent.get("method") == "tools/call" for params in [sent["params"]]]
    assert calls and all("task" not in params for params in calls)


async def test_a_2026_clients_lists_may_be_cached_no_longer_than_the_backend_allows(
        aiohttp_server: Any, gateway: StartGateway) -> None:
    fake = EraFake("2026")
    fake.list_ttl = 1_500
    fake.url = str((await aiohttp_server(fake.app)).make_url("/mcp"))
    running = await gateway(make_config([{"name": "hinted", "transport": "http", "url": fake.url}]))
    async with aiohttp.ClientSession() as session:
        modern = StatelessClient(session, running.url, make_token("acme"))
        listed = (await modern.call("tools/list"))["result"]
        discovered = (await modern.call("server/discover"))["result"]
    assert (listed["ttlMs"], listed["cacheScope"]) == (1_500, "private")  # the gateway's own would be 5 s
    assert discovered["ttlMs"] == 1_500



GROWING = {"mh": "announces on its listen stream", "sh": "serves no listen", "ms": "a stdio child, listened to",
           "bh": "serves both eras, announces on its listen stream"}
"""SDK backends whose `grow` adds a tool: mh, bh and ms tell the gateway on listen streams, sh is re-listed. bh
serves both eras: its session clients' calls and its 2026 clients' alike are heard on the gateway's listen stream
(the SDK's `ctx.notify_tools_changed()` goes to listen streams only)."""


@pytest.fixture
async def growing(gateway: StartGateway) -> AsyncIterator[RunningGateway]:
    http = {"mh": EraBackend("2026"), "sh": EraBackend("2026", silent=True), "bh": EraBackend("both")}
    try:
        await asyncio.gather(*(backend.start() for backend in http.values()))
        stdio = [sys.executable, SCRIPT, "--transport", "stdio"]
        yield await gateway(make_config([{"name": "mh", "transport": "http", "url": http["mh"].url},
                                         {"name": "sh", "transport": "http", "url": http["sh"].url},
                                         {"name": "bh", "transport": "http", "url": http["bh"].url},
                                         {"name": "ms", "transport": "stdio", "command": stdio, "protocol": "2026"}]))
    finally:
        await asyncio.gather(*(backend.stop() for backend in http.values()))


@pytest.mark.parametrize("backend", list(GROWING))
async def test_a_2026_backends_new_tool_reaches_a_listen_stream(growing: RunningGateway, backend: str) -> None:
    async with client(growing.url, "auto") as sdk, sdk.listen(tools_list_changed=True) as subscription:
        await sdk.call_tool(f"{backend}__grow", {"name": "extra"})
        assert await asyncio.wait_for(anext(subscription), ANNOUNCED) == ToolsListChanged()
        assert f"{backend}__extra" in {tool.name for tool in (await sdk.list_tools()).tools}
    upstream = growing.app[keys.POOL].get(backend)
    assert upstream.announces == (backend != "sh")


@pytest.mark.parametrize("backend", list(GROWING))
async def test_a_2026_backends_new_tool_reaches_a_get_stream(growing: RunningGateway, raw_client: Any,
                                                            backend: str) -> None:
    legacy = raw_client(growing.url, make_token("acme"))
    await legacy.initialize()
    async with aiohttp.ClientSession() as http:
        stream = await GetStream(http, growing.url, legacy.token, legacy.session_id).open()
        try:
            called = await legacy.call("tools/call", {"name": f"{backend}__grow", "arguments": {"name": "extra"}})
            assert called["result"]["content"][0]["text"] == "extra"
            assert await stream.methods_within(ANNOUNCED) == ["notifications/tools/list_changed"]
        finally:
            await stream.close()
    listed = (await legacy.call("tools/list"))["result"]["tools"]
    assert f"{backend}__extra" in {tool["name"] for tool in listed}
