"""An MCP backend built with the official SDK that exports its own spans (the SDK's server middleware
makes a SERVER span per request, parented by the request's `_meta` context) to the OTLP/HTTP endpoint in
TRACED_BACKEND_OTLP. Run as `python traced_backend.py --transport stdio|http [--port P]`."""

from __future__ import annotations

import os
import sys

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic import BaseModel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repository, for `backends`

from backends import runner

SERVICE = "sdk-backend"

provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=os.environ["TRACED_BACKEND_OTLP"])))
trace.set_tracer_provider(provider)

server = MCPServer("traced")


@server.tool()
def echo(text: str) -> str:
    """Say it back."""
    return text


@server.tool()
def refuse(reason: str) -> str:
    """Always a tool error (isError)."""
    raise ToolError(reason)


class Confirmation(BaseModel):
    confirm: bool


@server.tool()
async def confirm(action: str, ctx: Context) -> str:
    """Ask the user (an elicitation, relayed by the gateway to its client)."""
    answer = await ctx.elicit(f"Do you want to {action}?", schema=Confirmation)
    return answer.action


@server.prompt()
def greet(name: str) -> str:
    """A greeting for `name`."""
    return f"Hello, {name}"


@server.resource("traced://note", name="note")
def note() -> str:
    """A fixed note."""
    return "a note"


if __name__ == "__main__":
    runner.main(server, description="traced test backend")
