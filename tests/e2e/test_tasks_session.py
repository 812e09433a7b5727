"""2025-11-25 tasks (experimental, SEP-1686) from session clients, through the gateway to the reference server
`@modelcontextprotocol/server-everything` (its `simulate-research-query` requires a task), and direct to it.

The official SDK client has no 2025-11-25 tasks, so a plain HTTP client drives both ends. The same lifecycle
must come out direct and through the gateway: the task created, polled to `completed`, its result fetched;
a cancel reaches the backend. The gateway's handle opens for its own tenant and subject only (anyone else gets
the error of an unknown task), tasks/list lists the caller's own tasks only, and a client that did not
declare `tasks` is not listed the tool.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest
from conftest import MCP_HEADERS, RunningGateway, StartGateway, make_config, make_token, stdio_backend
from e2e.everything_server import serve_everything

pytestmark = pytest.mark.timeout(180)

TOOL = "simulate-research-query"
TENANTS = {"acme": {"backends": ["*"]}, "beta": {"backends": ["*"]}, "globex": {"backends": ["calc"]}}
TERMINAL = {"completed", "failed", "cancelled"}
RELATED = "io.modelcontextprotocol/related-task"
STATUS = "notifications/tasks/status"
ANSWER = {"action": "accept", "content": {"interpretation": "historical"}}
"""What the client answers an elicitation with (an ambiguous research query asks which reading is meant)."""


class Session:
    """A 2025-11-25 session over plain HTTP; replies as JSON or SSE (the reference server streams them)."""

    def __init__(self, http: aiohttp.ClientSession, url: str, token: str | None = None) -> None:
        self.http, self.url, self.token = http, url, token
        self.session_id: str | None = None
        self.version = "2025-11-25"
        self.next_id = 0
        self.asked: list[dict[str, Any]] = []  # the server's requests, each answered with ANSWER

    async def open(self, capabilities: dict[str, Any], version: str = "2025-11-25") -> dict[str, Any]:
        self.version = version
        result = await self.result("initialize", {"protocolVersion": version, "capabilities": capabilities,
                                                  "clientInfo": {"name": "raw", "version": "1"}})
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    async def send(self, message: dict[str, Any]) -> dict[str, Any] | None:
        headers = dict(MCP_HEADERS, **{"MCP-Protocol-Version": self.version})
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        async with self.http.post(self.url, data=orjson.dumps(message), headers=headers) as response:
            self.session_id = response.headers.get("Mcp-Session-Id", self.session_id)
            assert response.status in (200, 202), (response.status, await response.read())
            if "id" not in message or "method" not in message:  # a notification, or our answer to the server
                return None
            if response.content_type == "application/json":
                return orjson.loads(await response.read())
            async for line in response.content:  # SSE: answer what the server asks, until the reply
                if not line.startswith(b"data:") or not line[5:].strip():
                    continue
                frame = orjson.loads(line[5:])
                if "method" in frame and "id" in frame:
                    self.asked.append(frame)
                    await self.send({"jsonrpc": "2.0", "id": frame["id"], "result": ANSWER})
                elif frame.get("id") == message["id"]:
                    return frame
        raise AssertionError(f"no reply to {message}")

    async def listen(self, heard: list[dict[str, Any]]) -> None:
        """The session's GET stream, until cancelled: each message on it into `heard`."""
        headers = {"Accept": "text/event-stream", "MCP-Protocol-Version": self.version,
                   "Mcp-Session-Id": self.session_id or ""}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        async with self.http.get(self.url, headers=headers) as response:
            assert response.status == 200, await response.read()
            async for line in response.content:
                if line.startswith(b"data:") and line[5:].strip():
                    heard.append(orjson.loads(line[5:]))

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        reply = await self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert reply is not None
        return reply

    async def result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        reply = await self.call(method, params)
        assert "result" in reply, reply
        return reply["result"]


# ---------------------------------------------------------------- the servers


@pytest.fixture(scope="module")
async def everything() -> AsyncIterator[str]:
    async with serve_everything() as url:
        yield url


@pytest.fixture
async def running(everything: str, gateway: StartGateway) -> RunningGateway:
    backends = [{"name": "everything", "transport": "http", "url": everything, "namespace": ""}, stdio_backend("calc")]
    return await gateway(make_config(backends, tenants=TENANTS))


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def opened(http: aiohttp.ClientSession, url: str, token: str | None = None,
                 capabilities: dict[str, Any] | None = None) -> tuple[Session, dict[str, Any]]:
    session = Session(http, url, token)
    initialized = await session.open({"tasks": {}} if capabilities is None else capabilities)
    return session, initialized


async def lifecycle(session: Session, ambiguous: bool = False) -> dict[str, Any]:
    """A task of the tool, polled until it ends (or asks for input), and its result: what a client sees of it
    (times and ids aside). An ambiguous query asks the client which reading it means, during tasks/result."""
    created = await session.result("tools/call", {"name": TOOL, "arguments": {"topic": "tides", "ambiguous": ambiguous},
                                                  "task": {"ttl": 60000}})
    task = created["task"]
    statuses = [task["status"]]
    for _ in range(200):
        got = await session.result("tasks/get", {"taskId": task["taskId"]})
        assert got["taskId"] == task["taskId"]
        if got["status"] != statuses[-1]:
            statuses.append(got["status"])
        if got["status"] in TERMINAL | {"input_required"}:
            break
        await asyncio.sleep(0.2)
    result = await session.result("tasks/result", {"taskId": task["taskId"]})
    assert result["_meta"][RELATED]["taskId"] == task["taskId"]
    asked = [(request["method"], request["params"]["_meta"][RELATED]["taskId"] == task["taskId"])
             for request in session.asked]
    return {"created": sorted(task), "ttl": task.get("ttl"), "statuses": statuses, "content": result["content"],
            "isError": result.get("isError", False), "asked": asked}


# ---------------------------------------------------------------- the tests


async def test_a_task_runs_through_the_gateway_as_it_does_direct(running: RunningGateway, everything: str,
                                                                 http: aiohttp.ClientSession) -> None:
    direct, direct_init = await opened(http, everything)
    through, init = await opened(http, running.url, make_token("acme"))
    assert init["capabilities"]["tasks"] == direct_init["capabilities"]["tasks"] == {
        "list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    listed = {tool["name"]: tool for tool in (await through.result("tools/list", {}))["tools"]}
    assert listed[TOOL]["execution"] == {"taskSupport": "required"}
    seen = await lifecycle(through)
    assert seen == await lifecycle(direct)
    assert seen["statuses"][-1] == "completed" and "Research Report: tides" in seen["content"][0]["text"]


async def test_a_task_that_needs_input_asks_the_client_through_the_gateway_as_direct(
        running: RunningGateway, everything: str, http: aiohttp.ClientSession) -> None:
    declaring = {"tasks": {}, "elicitation": {}}
    direct, _ = await opened(http, everything, capabilities=declaring)
    through, _ = await opened(http, running.url, make_token("acme"), capabilities=declaring)
    seen = await lifecycle(through, ambiguous=True)
    assert seen == await lifecycle(direct, ambiguous=True)
    assert seen["statuses"] == ["working", "input_required"]
    assert seen["asked"] == [("elicitation/create", True)]  # naming the task as the client knows it
    assert "Clarification**: historical" in seen["content"][0]["text"]


async def test_a_task_asks_only_what_the_client_fetching_its_result_declared(running: RunningGateway,
                                                                             http: aiohttp.ClientSession) -> None:
    maker, _ = await opened(http, running.url, make_token("acme"), capabilities={"tasks": {}, "elicitation": {}})
    fetcher, _ = await opened(http, running.url, make_token("acme"))  # the same caller, another session: no elicitation
    created = await maker.result("tools/call", {"name": TOOL, "arguments": {"topic": "tides", "ambiguous": True},
                                                "task": {}})
    result = await fetcher.result("tasks/result", {"taskId": created["task"]["taskId"]})
    assert fetcher.asked == [] and maker.asked == []  # refused for the backend, which goes on without an answer
    assert "elicitation unavailable" in result["content"][0]["text"]


async def test_a_handle_opens_for_its_own_tenant_and_subject_only(running: RunningGateway,
                                                                  http: aiohttp.ClientSession) -> None:
    owner, _ = await opened(http, running.url, make_token("acme"))
    created = await owner.result("tools/call", {"name": TOOL, "arguments": {"topic": "x"}, "task": {}})
    handle = created["task"]["taskId"]
    assert (await owner.result("tasks/get", {"taskId": handle}))["taskId"] == handle
    unknown = (await owner.call("tasks/get", {"taskId": "no-such-task"}))["error"]
    assert unknown["code"] == -32602
    for token in (make_token("acme", sub="someone-else"), make_token("beta")):
        other, _ = await opened(http, running.url, token)
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            assert (await other.call(method, {"taskId": handle}))["error"] == unknown
    altered = handle[:-2] + ("AA" if not handle.endswith("AA") else "BB")
    assert (await owner.call("tasks/get", {"taskId": altered}))["error"] == unknown


async def test_a_cancel_reaches_the_backend(running: RunningGateway, everything: str,
                                            http: aiohttp.ClientSession) -> None:
    for session, _ in (await opened(http, everything), await opened(http, running.url, make_token("acme"))):
        created = await session.result("tools/call", {"name": TOOL, "arguments": {"topic": "y"}, "task": {}})
        handle = created["task"]["taskId"]
        cancelled = await session.result("tasks/cancel", {"taskId": handle})
        assert (cancelled["taskId"], cancelled["status"]) == (handle, "cancelled")
        assert (await session.result("tasks/get", {"taskId": handle}))["status"] == "cancelled"  # the backend's
        again = (await session.call("tasks/cancel", {"taskId": handle}))["error"]
        assert again["code"] == -32602  # already terminal: the backend's own refusal, passed on


async def test_clients_that_cannot_use_tasks_do_not_see_the_tool(running: RunningGateway,
                                                                 http: aiohttp.ClientSession) -> None:
    plain, init = await opened(http, running.url, make_token("acme"), capabilities={})
    assert init["capabilities"]["tasks"]  # the gateway serves tasks; this client just never said it knows them
    assert TOOL not in {tool["name"] for tool in (await plain.result("tools/list", {}))["tools"]}
    refused = (await plain.call("tools/call", {"name": TOOL, "arguments": {"topic": "z"}, "task": {}}))["error"]
    assert refused["code"] == -32602 and TOOL in refused["message"]
    older = Session(http, running.url, make_token("acme"))
    older_init = await older.open({"tasks": {}}, version="2025-06-18")  # no tasks before 2025-11-25
    assert "tasks" not in older_init["capabilities"]
    assert TOOL not in {tool["name"] for tool in (await older.result("tools/list", {}))["tools"]}
    assert (await older.call("tasks/get", {"taskId": "x"}))["error"]["code"] == -32601  # not offered to it


async def test_tasks_are_offered_only_where_a_backend_serves_them(running: RunningGateway,
                                                                  http: aiohttp.ClientSession) -> None:
    session, init = await opened(http, running.url, make_token("globex"))  # its one backend has no tasks
    assert "tasks" not in init["capabilities"]
    call = await session.result("tools/call", {"name": "calc__add", "arguments": {"a": 1, "b": 2}, "task": {}})
    assert "task" not in call and call["content"]  # the param dropped: the call ran as any other


async def test_tasks_list_lists_the_callers_own_tasks_as_direct(running: RunningGateway, everything: str,
                                                                http: aiohttp.ClientSession) -> None:
    async def made(session: Session) -> tuple[set[str], set[str]]:
        handles = set()
        for topic in ("a", "b"):
            created = await session.result("tools/call", {"name": TOOL, "arguments": {"topic": topic}, "task": {}})
            handles.add(created["task"]["taskId"])
        listed = (await session.result("tasks/list", {}))["tasks"]
        assert all(task["status"] in {"working", "completed"} and "createdAt" in task for task in listed)
        return handles, {task["taskId"] for task in listed}

    direct, _ = await opened(http, everything)
    mine, listed = await made((await opened(http, running.url, make_token("acme")))[0])
    assert listed == mine  # every one of them, by its handle
    direct_mine, direct_listed = await made(direct)
    assert direct_listed == direct_mine
    same_tenant, _ = await opened(http, running.url, make_token("acme", sub="someone-else"))
    assert (await same_tenant.result("tasks/list", {}))["tasks"] == []  # the backend session is shared: not its list
    bad = await same_tenant.call("tasks/list", {"cursor": "not-ours"})
    assert bad["error"]["code"] == -32602


async def test_status_notifications_reach_the_session_that_made_the_task_as_direct(
        running: RunningGateway, everything: str, http: aiohttp.ClientSession) -> None:
    async def statuses(session: Session) -> list[str]:
        heard: list[dict[str, Any]] = []
        listening = asyncio.create_task(session.listen(heard))
        await asyncio.sleep(0.5)  # the stream is open
        created = await session.result("tools/call", {"name": TOOL, "arguments": {"topic": "w"}, "task": {}})
        handle = created["task"]["taskId"]
        for _ in range(100):
            if any(m["params"]["status"] == "completed" for m in heard if m.get("method") == STATUS):
                break
            await asyncio.sleep(0.2)
        listening.cancel()
        told = [m["params"] for m in heard if m.get("method") == STATUS]
        assert told and all(params["taskId"] == handle for params in told)  # by the handle its client knows
        return [params["status"] for params in told]

    through = await statuses((await opened(http, running.url, make_token("acme")))[0])
    direct = await statuses((await opened(http, everything))[0])
    # the same, but for those sent before the CreateTaskResult reached the gateway (it knows no such task yet)
    assert through[-1] == "completed" and 0 < len(through) <= len(direct) and direct[-len(through):] == through
