"""The Node reference servers, direct and through the gateway: the official SDK client must see the same.

`@modelcontextprotocol/server-everything` over Streamable HTTP, `server-memory` and `server-filesystem`
over stdio (installed with npm beside the conformance suite, tests/conformance/conformance_suite.py),
all three behind one gateway with the default config (`protocol: auto`, unprefixed: `namespace: ""`,
so names compare as they are). For clients declaring nothing and clients declaring sampling,
elicitation and roots, in a session and at 2026-07-28 (`mode="auto"`: the reference servers serve the
handshake era only, so a direct 2026 client falls back to a session and the gateway bridges), the
tools, prompts, resources and templates listed, and the result of every tool that needs no network,
must be the same directly and through the gateway.

Left out of the comparison, each for a stated reason: `gzip-file-as-resource` (its default input is a
download); tools whose `execution.taskSupport` is `required` (the gateway lists them only to 2025-11-25
clients that declared `tasks`, which the SDK client cannot; test_tasks_session.py compares their task
lifecycle direct and through the gateway, docs/concepts/tasks.md); and the result of server-everything's
`get-roots-list` for a client that declared roots: the server asks for the roots right after its
initialize, outside any call, and a backend session serves many clients, so the gateway has no client to
ask (README, "Backends asking the client"); the tool is listed and called all the same, and answers.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from conftest import RunningGateway, StartGateway, make_config, make_token
from e2e.everything_server import serve_everything
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))
from conformance_suite import ensure_installed, node, reference_server

pytestmark = pytest.mark.timeout(300)

SKIPPED = {"gzip-file-as-resource"}
"""Tools not called: they need the network (see the module docstring)."""
ROOTS_OUTSIDE_CALLS = "get-roots-list"
"""Called, its result not compared (see the module docstring)."""
ARGUMENTS: dict[str, dict[str, Any]] = {
    "echo": {"message": "hello"},
    "get-annotated-message": {"messageType": "success", "includeImage": True},
    "get-resource-links": {"count": 2},
    "get-resource-reference": {"resourceType": "Text", "resourceId": 2},
    "get-structured-content": {"location": "Chicago"},
    "get-sum": {"a": 2, "b": 3},
    "trigger-long-running-operation": {"duration": 0.2, "steps": 2},
    "trigger-url-elicitation": {"url": "https://example.com/consent"},
    "trigger-sampling-request": {"prompt": "a haiku", "maxTokens": 20},
}
"""Arguments of the server-everything tools that take some (the others are called with none)."""


def memory_calls() -> list[tuple[str, dict[str, Any]]]:
    """server-memory's tools, in an order that leaves each something to work on."""
    entity = {"name": "ada", "entityType": "person", "observations": ["wrote programs"]}
    return [("create_entities", {"entities": [entity, {**entity, "name": "babbage"}]}),
            ("create_relations", {"relations": [{"from": "ada", "to": "babbage", "relationType": "knew"}]}),
            ("add_observations", {"observations": [{"entityName": "ada", "contents": ["met babbage"]}]}),
            ("search_nodes", {"query": "babbage"}), ("open_nodes", {"names": ["ada"]}), ("read_graph", {}),
            ("delete_observations", {"deletions": [{"entityName": "ada", "observations": ["met babbage"]}]}),
            ("delete_relations", {"relations": [{"from": "ada", "to": "babbage", "relationType": "knew"}]}),
            ("delete_entities", {"entityNames": ["babbage"]}), ("read_graph", {})]


def filesystem_calls(root: Path) -> list[tuple[str, dict[str, Any]]]:
    """server-filesystem's tools on a folder of its own (writes put back what was there)."""
    note, other = str(root / "note.txt"), str(root / "sub" / "other.txt")
    return [("list_allowed_directories", {}), ("list_directory", {"path": str(root)}),
            ("list_directory_with_sizes", {"path": str(root), "sortBy": "name"}),
            ("directory_tree", {"path": str(root)}), ("read_text_file", {"path": note}),
            ("read_text_file", {"path": note, "head": 1}), ("read_file", {"path": note}),
            ("read_media_file", {"path": str(root / "dot.png")}),
            ("read_multiple_files", {"paths": [note, other]}),
            ("search_files", {"path": str(root), "pattern": "*.txt"}),
            ("write_file", {"path": str(root / "made.txt"), "content": "made\n"}),
            ("edit_file", {"path": str(root / "made.txt"), "edits": [{"oldText": "made", "newText": "edited"}]}),
            ("create_directory", {"path": str(root / "new")}),
            ("move_file", {"source": str(root / "made.txt"), "destination": str(root / "new" / "moved.txt")}),
            ("get_file_info", {"path": note})]


def filesystem_tree(root: Path) -> None:
    """The folder server-filesystem serves, the same before each client's calls."""
    for made in (root / "new" / "moved.txt", root / "made.txt"):
        made.unlink(missing_ok=True)
    if (root / "new").exists():
        (root / "new").rmdir()
    (root / "sub").mkdir(parents=True, exist_ok=True)
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
    for path, content in ((root / "note.txt", b"first line\nsecond line\n"), (root / "sub" / "other.txt", b"other\n"),
                          (root / "dot.png", base64.b64decode(png))):
        if not path.exists():  # written once: get_file_info's times stay as they were
            path.write_bytes(content)


# ---------------------------------------------------------------- the servers


@pytest.fixture(scope="module")
def installed() -> None:
    ensure_installed()


@pytest.fixture(scope="module")
async def everything(installed: None) -> AsyncIterator[str]:
    async with serve_everything() as url:
        yield url


def stdio_servers(work: Path, who: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    """server-memory and server-filesystem: command and environment, with `who`'s own memory file."""
    return {"memory": ([str(node()), str(reference_server("server-memory"))],
                       {"MEMORY_FILE_PATH": str(work / f"memory-{who}.jsonl")}),
            "filesystem": ([str(node()), str(reference_server("server-filesystem")), str(work / "files")], {})}


# ---------------------------------------------------------------- the clients


class Declaring:
    """A client's answers to the servers' questions, the same whichever way it is connected."""

    def __init__(self, root: Path) -> None:
        self.root = root

    async def sampling(self, context: Any, params: Any) -> CreateMessageResult:
        asked = " ".join(m.content.text for m in params.messages if isinstance(m.content, TextContent))
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=f"[{asked}]"), model="m")

    async def elicitation(self, context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="accept", content={"name": "ada", "color": "teal", "email": "ada@example.com"})

    async def roots(self, context: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=self.root.as_uri(), name="files")])

    def callbacks(self) -> dict[str, Any]:
        return {"sampling_callback": self.sampling, "elicitation_callback": self.elicitation,
                "list_roots_callback": self.roots}


@asynccontextmanager
async def connected(server: Any, mode: str, callbacks: dict[str, Any], token: bool = False) -> AsyncIterator[Client]:
    if isinstance(server, StdioServerParameters):
        async with Client(server, mode=mode, read_timeout_seconds=60, **callbacks) as sdk:
            yield sdk
        return
    headers = {"Authorization": f"Bearer {make_token('acme')}"} if token else {}
    async with (httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http,
                Client(streamable_http_client(server, http_client=http), mode=mode, read_timeout_seconds=60,
                       **callbacks) as sdk):
        yield sdk


async def seen(sdk: Client, calls: list[tuple[str, dict[str, Any]]] | None) -> dict[str, Any]:
    """Everything a client sees: the lists, and the outcome of each call (by default, of each listed tool)."""
    tools = {t.name: t.model_dump(mode="json", exclude_none=True) for t in (await sdk.list_tools()).tools}
    view: dict[str, Any] = {"tools": tools}
    capabilities = sdk.server_capabilities
    view["prompts"] = [p.model_dump(mode="json") for p in (await sdk.list_prompts()).prompts] \
        if capabilities and capabilities.prompts else []
    offers_resources = bool(capabilities and capabilities.resources)
    view["resources"] = [r.model_dump(mode="json") for r in (await sdk.list_resources()).resources] \
        if offers_resources else []
    view["templates"] = [t.model_dump(mode="json") for t in (await sdk.list_resource_templates()).resource_templates] \
        if offers_resources else []
    calls = calls or everything_calls(tools)
    view["results"] = [(name, await outcome(sdk, name, arguments)) for name, arguments in calls]
    return view


def everything_calls(tools: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A call of each listed server-everything tool that needs no network."""
    return [(name, ARGUMENTS.get(name, {})) for name, tool in tools.items()
            if name not in SKIPPED and not needs_tasks(tool)]


async def outcome(sdk: Client, name: str, arguments: dict[str, Any]) -> Any:
    try:
        result = await sdk.call_tool(name, arguments)
    except MCPError as exc:
        return {"error": exc.error.code, "message": exc.error.message}
    return steady(result.model_dump(mode="json", exclude_none=True))


MOVING = re.compile(r"\d{1,2}:\d{2}:\d{2}\s?[AP]M|accessed: [^\\]*|[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}")
"""What differs between two connections a moment apart: a clock time (server-everything's dynamic resources
say when they were made), a file's access time (server-filesystem's get_file_info), a session id."""


def steady(result: Any) -> Any:
    """The result without what moves, and without the name of the server that made it: a 2026 reply names
    the gateway (`_meta` serverInfo), and a direct 2026 client falls back to a session here, where none is named."""
    meta = result.pop("meta", None) or {}
    meta.pop("io.modelcontextprotocol/serverInfo", None)
    if meta:
        result["meta"] = meta
    return json.loads(MOVING.sub("<moving>", json.dumps(result)))


def without_hidden(tools: dict[str, Any]) -> dict[str, Any]:
    """A direct list as the gateway serves it to these clients: tools that require 2025-11-25 tasks are hidden
    (the clients declared no `tasks`)."""
    return {name: tool for name, tool in tools.items() if not needs_tasks(tool)}


def needs_tasks(tool: dict[str, Any]) -> bool:
    return (tool.get("execution") or {}).get("task_support") == "required"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    filesystem_tree(tmp_path / "files")
    return tmp_path


@pytest.fixture
async def running(everything: str, work: Path, gateway: StartGateway) -> RunningGateway:
    backends = [{"name": "everything", "transport": "http", "url": everything, "namespace": ""}]
    for name, (command, env) in stdio_servers(work, "gateway").items():
        backends.append({"name": name, "transport": "stdio", "command": command, "env": env, "namespace": ""})
    return await gateway(make_config(backends))


@pytest.mark.parametrize("declares", ["nothing", "sampling, elicitation, roots"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_reference_servers_look_the_same_through_the_gateway(
        everything: str, running: RunningGateway, work: Path, mode: str, declares: str) -> None:
    callbacks = Declaring(work / "files").callbacks() if declares != "nothing" else {}
    direct: dict[str, Any] = {}
    async with connected(everything, mode, callbacks) as sdk:
        direct["everything"] = await seen(sdk, None)
    for name, (command, env) in stdio_servers(work, "direct").items():
        calls = memory_calls() if name == "memory" else filesystem_calls(work / "files")
        if name == "filesystem":
            filesystem_tree(work / "files")
        async with connected(StdioServerParameters(command=command[0], args=command[1:], env=env), mode,
                             callbacks) as sdk:
            direct[name] = await seen(sdk, calls)
    filesystem_tree(work / "files")
    async with connected(running.url, mode, callbacks, token=True) as sdk:
        listed = {t.name for t in (await sdk.list_tools()).tools}
        through = {"everything": await seen(sdk, everything_calls(direct["everything"]["tools"]))}
        through["memory"] = {"results": [(n, await outcome(sdk, n, a)) for n, a in memory_calls()]}
        through["filesystem"] = {"results": [(n, await outcome(sdk, n, a))
                                             for n, a in filesystem_calls(work / "files")]}
    # One gateway serves the three unprefixed: its list is the union of theirs.
    expected_tools = {**without_hidden(direct["everything"]["tools"]), **direct["memory"]["tools"],
                      **direct["filesystem"]["tools"]}
    assert through["everything"]["tools"] == expected_tools
    assert listed == set(expected_tools)
    for kind in ("prompts", "resources", "templates"):  # in config order: everything, memory, filesystem
        assert through["everything"][kind] == [*direct["everything"][kind], *direct["memory"][kind],
                                               *direct["filesystem"][kind]], kind
    results = dict(through["everything"]["results"])
    if declares != "nothing":
        assert not results.pop(ROOTS_OUTSIDE_CALLS).get("is_error"), "listed, it answers"
        direct["everything"]["results"].remove(next(r for r in direct["everything"]["results"]
                                                     if r[0] == ROOTS_OUTSIDE_CALLS))
    assert list(results.items()) == direct["everything"]["results"]
    for name in ("memory", "filesystem"):
        assert through[name]["results"] == direct[name]["results"], name
    gated = {"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"}
    assert gated <= set(expected_tools) if declares != "nothing" else not gated & set(expected_tools)
