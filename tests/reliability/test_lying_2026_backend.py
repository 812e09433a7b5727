"""A 2026-07-28 backend that lies: whatever its tools/call answers, clients of both eras get a clean answer.

The backend (a plain HTTP server in a thread) answers `server/discover` and `tools/list` properly,
then tools/call with a random result or error: unknown or ill-typed `resultType`, an
`input_required` whose `inputRequests` ask for nothing known, a `task` without a usable `taskId`,
content blocks of any shape, a `_meta` that is not an object, a result that is not an object at all.
A session client (2025-11-25, no capabilities) and a 2026 client (random capabilities, the tasks
extension among them) call it through a served gateway: never an HTTP 500, a traceback, a made-up
`resultType` or a status that disagrees with the error code; the gateway stays healthy and its log
holds no unexpected exception.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from lifecycle.processes import HOST

from reliability.served import ServedGateway, assert_clean
from reliability.strategies import MODERN, json_values

pytestmark = pytest.mark.timeout(300)

STATUS_OF_CODE = {-32700: 400, -32600: 400, -32602: 400, -32020: 400, -32021: 400, -32022: 400, -32601: 404}
"""The revision's HTTP status for each error code of a 2026 JSON reply (PROTOCOL-2026 §A.4); other codes: 200."""
TASKS = "io.modelcontextprotocol/tasks"
SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "liar", "version": "1"}}
DISCOVER = {"resultType": "complete", "supportedVersions": [MODERN], "capabilities": {"tools": {}},
            "ttlMs": 0, "cacheScope": "private", "_meta": SERVER_INFO}
TOOLS = {"resultType": "complete", "tools": [{"name": "lie", "inputSchema": {"type": "object"}}],
         "ttlMs": 600_000, "cacheScope": "private", "_meta": SERVER_INFO}

TASK = {"resultType": "task", "taskId": "t-1", "_meta": SERVER_INFO}
QUESTION = {"resultType": "input_required", "requestState": "s", "inputRequests": {
    "q": {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {"type": "object"}}}}}
CALL = {"name": "liar__lie", "arguments": {}}


class LyingBackend:
    """Speaks 2026-07-28 over HTTP; its tools/call answers with `reply` ("result" or "error", and the value)."""

    def __init__(self) -> None:
        self.reply: tuple[str, Any] = ("result", {"content": []})
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                method = message.get("method")
                if method == "server/discover":
                    body: dict[str, Any] = {"result": DISCOVER}
                elif method == "tools/list":
                    body = {"result": TOOLS}
                elif method == "tools/call":
                    body = dict([backend.reply])
                else:
                    body = {"error": {"code": -32601, "message": "Method not found"}}
                data = orjson.dumps({"jsonrpc": "2.0", "id": message.get("id"), **body})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{HOST}:{self.server.server_address[1]}/mcp"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> LyingBackend:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


blocks = st.lists(st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image", "resource_link", "resource", "weird"]) | json_values},
    optional={"text": json_values, "uri": st.sampled_from(["file:///x", "liar+x://y"]) | json_values,
              "resource": json_values, "data": json_values}), max_size=3)
input_requests = st.dictionaries(st.text(max_size=5), st.fixed_dictionaries(
    {"method": st.sampled_from(["sampling/createMessage", "elicitation/create", "roots/list", "bogus"]) | json_values},
    optional={"params": json_values}), min_size=1, max_size=2) | st.lists(json_values, min_size=1, max_size=2)
results = st.fixed_dictionaries({
    "resultType": st.sampled_from(["complete", "input_required", "task", "weird"]) | json_values,
}, optional={
    "content": blocks | json_values, "structuredContent": json_values, "isError": json_values,
    "inputRequests": input_requests, "requestState": st.text(max_size=20) | json_values,
    "taskId": st.text(max_size=10) | json_values, "ttlMs": json_values, "cacheScope": json_values,
    "_meta": st.just(SERVER_INFO) | json_values,
})


def _asks_something(result: Any) -> Any:
    """An input_required always asks (rounds that ask nothing are retried for seconds: test_http_eras has them)."""
    if isinstance(result, dict) and result.get("resultType") == "input_required" and not result.get("inputRequests"):
        return {**result, "inputRequests": {"q": {"method": "bogus"}}}
    return result


replies = st.one_of(results.map(_asks_something).map(lambda result: ("result", result)),
                    results.map(_asks_something).map(lambda result: ("result", result)),
                    json_values.map(lambda result: ("result", result)),  # not even an object
                    json_values.map(lambda error: ("error", error)),
                    st.fixed_dictionaries({"code": st.integers(-33000, -32000), "message": st.text(max_size=40)},
                                          optional={"data": json_values}).map(lambda error: ("error", error)))
capabilities = st.sampled_from([{}, {"sampling": {}, "elicitation": {}}, {"extensions": {TASKS: {}}}])


@pytest.fixture(scope="module")
def liar() -> Iterator[LyingBackend]:
    with LyingBackend() as backend:
        yield backend


@pytest.fixture(scope="module")
def served(liar: LyingBackend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    backend = {"name": "liar", "transport": "http", "url": liar.url, "protocol": "2026", "timeout_seconds": 3,
               "circuit": {"failures": 0, "failure_ratio": 0}}  # judge each lie on its own
    gateway = ServedGateway(tmp_path_factory.mktemp("liar"), backends=[backend])
    try:
        gateway.wait_ready()
        yield gateway
        gateway.healthy()
        log = gateway.output()
        for marker in ("request_failed", "dispatch_failed", "Internal error"):
            assert marker not in log, f"the gateway logged an unexpected exception:\n{log[-4000:]}"
    finally:
        gateway.stop()


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(reply=replies, declared=capabilities)
@example(reply=("result", TASK), declared={"extensions": {TASKS: {}}})
@example(reply=("result", QUESTION), declared={"sampling": {}, "elicitation": {}})
def test_whatever_a_2026_backend_answers_clients_of_both_eras_get_a_clean_answer(
        served: ServedGateway, liar: LyingBackend, reply: tuple[str, Any], declared: dict[str, Any]) -> None:
    liar.reply = reply
    status, _, body = served.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": CALL})
    assert_clean(status, body)
    assert status == 200, body[:300]
    assert "resultType" not in orjson.loads(body).get("result", {}), body[:300]  # a 2026 field, for 2026 only

    status, body = _call_at_2026(served, declared)
    assert_clean(status, body)
    answer = orjson.loads(body)
    code = answer["error"]["code"] if "error" in answer else None
    event(f"2026 client: {answer['result']['resultType'] if code is None else code}")
    assert status == STATUS_OF_CODE.get(code, 200), (status, answer)
    if code is None:
        kind = answer["result"]["resultType"]
        assert kind in ("complete", "input_required", "task"), answer
        assert kind != "task" or TASKS in declared.get("extensions", {}), answer  # no task it did not ask for


def test_a_well_formed_task_and_question_reach_the_2026_client_sealed(
        served: ServedGateway, liar: LyingBackend) -> None:
    """The counterpart of the lies: what a 2026 backend may send does get through, its handles in the gateway's seal."""
    liar.reply = ("result", TASK)
    status, body = _call_at_2026(served, {"extensions": {TASKS: {}}})
    task = orjson.loads(body)["result"]
    assert (status, task["resultType"]) == (200, "task"), body
    assert isinstance(task["taskId"], str) and task["taskId"] != "t-1"
    liar.reply = ("result", QUESTION)
    status, body = _call_at_2026(served, {"elicitation": {}})
    question = orjson.loads(body)["result"]
    assert (status, question["resultType"]) == (200, "input_required"), body
    assert question["inputRequests"] == QUESTION["inputRequests"]
    assert isinstance(question["requestState"], str) and question["requestState"] != "s"


def _call_at_2026(served: ServedGateway, declared: dict[str, Any]) -> tuple[int, bytes]:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": declared}
    routing = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "liar__lie"}
    message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {**CALL, "_meta": meta}}
    status, _, body = served.post(message, session=False, **routing)
    return status, body
