"""An official-SDK 2026-07-28 backend that serves the tasks extension (`io.modelcontextprotocol/tasks`).

Not a test module: tests run it as a process (`--transport http --port N`). The SDK 2.3.0 has no
tasks server, but its extension API has what one needs: `intercept_tool_call` answers a call with a
`CreateTaskResult` (an extension `resultType` the runner passes on as it is), and `MethodBinding`s
serve `tasks/get`, `tasks/update` and `tasks/cancel`. Tasks are kept in memory.

- `slow(steps)` runs as a task when the request declares the extension (else at once): working for
  `steps` times 50 ms, then completed with a text and a link to `memo://report`.
- `confirm(question)` runs only as a task (-32021 otherwise): input_required, asking `ok` by form
  elicitation, until `tasks/update` answers it; then completed with the answer.
- `eager()` returns a task whatever the request declared (a backend breaking the rule).
- `hang()` works until cancelled.

A tasks/* request must carry `Mcp-Name: <taskId>` (-32020 otherwise); every one seen is logged to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
from datetime import UTC, datetime
from typing import Any

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolRequestParams, RequestParams
from pydantic import Field

TASKS = "io.modelcontextprotocol/tasks"
TASK_TOOLS = {"slow", "confirm", "eager", "hang"}
ASK = {"ok": {"method": "elicitation/create", "params": {
    "mode": "form", "message": "Go ahead?",
    "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}}


def now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class TaskParams(RequestParams):
    task_id: str = Field(alias="taskId")


class UpdateParams(TaskParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses", default_factory=dict)


class Tasks(Extension):
    identifier = TASKS

    def __init__(self) -> None:
        self.tasks: dict[str, dict[str, Any]] = {}
        self.answers: dict[str, asyncio.Future[Any]] = {}
        self.jobs: dict[str, asyncio.Task[None]] = {}

    def methods(self) -> list[MethodBinding]:
        return [MethodBinding("tasks/get", TaskParams, self.get),
                MethodBinding("tasks/update", UpdateParams, self.update),
                MethodBinding("tasks/cancel", TaskParams, self.cancel)]

    async def intercept_tool_call(self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any],
                                  call_next: CallNext) -> HandlerResult:
        if params.name not in TASK_TOOLS:
            return await call_next(ctx)
        if params.name == "eager":
            return self.create("eager", {})
        if params.name == "slow" and not declared(ctx):
            return await call_next(ctx)
        require_client_extension(ctx, TASKS)
        return self.create(params.name, params.arguments or {})

    def create(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        task_id = secrets.token_urlsafe(12)
        stamp = now()
        self.tasks[task_id] = {"taskId": task_id, "status": "working", "createdAt": stamp, "lastUpdatedAt": stamp,
                               "ttlMs": 60_000, "pollIntervalMs": 50}
        self.jobs[task_id] = asyncio.get_running_loop().create_task(self.run(task_id, tool, arguments))
        return {"resultType": "task", **self.tasks[task_id]}

    async def run(self, task_id: str, tool: str, arguments: dict[str, Any]) -> None:
        if tool == "slow":
            await asyncio.sleep(0.05 * int(arguments.get("steps", 2)))
            self.finish(task_id, [{"type": "text", "text": "report ready"},
                                  {"type": "resource_link", "uri": "memo://report", "name": "report"}])
        elif tool == "confirm":
            self.answers[task_id] = asyncio.get_running_loop().create_future()
            self.change(task_id, status="input_required", inputRequests=ASK)
            answer = await self.answers[task_id]
            self.tasks[task_id].pop("inputRequests", None)
            self.change(task_id, status="working")
            self.finish(task_id, [{"type": "text", "text": f"{arguments.get('question')}: {answer}"}])
        elif tool == "hang":
            await asyncio.sleep(3600)
        else:
            self.finish(task_id, [{"type": "text", "text": "eager"}])

    def finish(self, task_id: str, content: list[dict[str, Any]]) -> None:
        self.change(task_id, status="completed", result={"content": content, "isError": False})

    def change(self, task_id: str, **fields: Any) -> None:
        self.tasks[task_id].update(fields, lastUpdatedAt=now())

    def task(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        headers = ctx.request.headers if ctx.request is not None else {}
        name = headers.get("mcp-name")
        print(f"{ctx.method} Mcp-Name={name} taskId={params.task_id}", file=sys.stderr, flush=True)
        if name != params.task_id:
            raise MCPError(code=-32020, message="Mcp-Name header does not match taskId")
        require_client_extension(ctx, TASKS)
        task = self.tasks.get(params.task_id)
        if task is None:
            raise MCPError(code=-32602, message="Unknown task")
        return task

    async def get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> HandlerResult:
        return dict(self.task(ctx, params))

    async def update(self, ctx: ServerRequestContext[Any, Any], params: UpdateParams) -> HandlerResult:
        self.task(ctx, params)
        answer = params.input_responses.get("ok")
        waiting = self.answers.get(params.task_id)
        if isinstance(answer, dict) and waiting is not None and not waiting.done():
            waiting.set_result((answer.get("content") or {}).get("ok"))
        return {}

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> HandlerResult:
        task = self.task(ctx, params)
        if task["status"] in ("working", "input_required"):
            self.jobs[params.task_id].cancel()
            self.change(params.task_id, status="cancelled")
        return {}


def declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and TASKS in capabilities.extensions)


server = MCPServer("tasks", version="1.0.0", log_level="WARNING", extensions=[Tasks()])


@server.tool()
def slow(steps: int = 2) -> str:
    """Prepare a report (a task when the client takes tasks)."""
    return "report ready at once"


@server.tool()
def confirm(question: str) -> str:
    """Ask the user before going on (only as a task)."""
    return "never run in place"


@server.tool()
def eager() -> str:
    """Always a task, even for a client that does not take tasks."""
    return "never run in place"


@server.tool()
def hang() -> str:
    """Work until cancelled (only as a task)."""
    return "never run in place"


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers, at once."""
    return a + b


@server.resource("memo://report", mime_type="text/plain")
def report() -> str:
    return "the report"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["http"], default="http")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    config = uvicorn.Config(server.streamable_http_app(host="127.0.0.1"), host="127.0.0.1", port=args.port,
                            log_level="warning", access_log=False, timeout_graceful_shutdown=1, lifespan="on")
    anyio.run(uvicorn.Server(config).serve)


if __name__ == "__main__":
    main()
