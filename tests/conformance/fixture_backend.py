"""The backend the official MCP conformance suite is run against, through the gateway.

Not a test module: `test_conformance.py` starts it as a real HTTP process
(`python fixture_backend.py --port N`) and puts the gateway in front of it. The suite calls fixed
tool, prompt and resource names (`test_simple_text`, `test_simple_prompt`, `test://static-text`, ...)
and checks fixed replies; the scenario descriptions in `@modelcontextprotocol/conformance` are the
specification this file follows. Built on the SDK's low-level `Server`, so every handler is visible
here and `resources/subscribe` and `logging/setLevel` are declared honestly.

Questions to the client (elicitation, sampling, roots) are asked in the era of the connection: real
server-to-client requests on a handshake-era session, an `InputRequiredResult` at 2026-07-28.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from fixture_asking import (
    CONTACT_SCHEMA,
    DEFAULTS_SCHEMA,
    ENUMS_SCHEMA,
    Ctx,
    ToolResult,
    ask,
    asked,
    capability_gated,
    capital,
    content_of,
    elicit_request,
    elicited,
    greeted,
    multi_round,
    multiple_inputs,
    name_request,
    request_state,
    roots_counted,
    sample_request,
    sampled,
    schema,
    tampered_state,
    text,
)
from mcp.server import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError

from gateway.demo import runner

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
OBJECT: dict[str, Any] = {"type": "object", "properties": {}}
subscriptions: set[str] = set()
dynamic: set[str] = set()  # test_dynamic_tool and test_dynamic_prompt, while toggled on


# Tools with fixed replies --------------------------------------------------------------------

async def simple_text(ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
    return text("This is a simple text response for testing.")


async def image_content(ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
    return types.CallToolResult(content=[types.ImageContent(type="image", data=PNG, mime_type="image/png")])


async def audio_content(ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
    return types.CallToolResult(content=[types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")])


def embedded(uri: str, mime_type: str, body: str) -> types.EmbeddedResource:
    resource = types.TextResourceContents(uri=uri, mime_type=mime_type, text=body)
    return types.EmbeddedResource(type="resource", resource=resource)


async def embedded_resource(ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
    body = "This is an embedded resource content."
    return types.CallToolResult(content=[embedded("test://embedded-resource", "text/plain", body)])


async def multiple_content_types(ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
    return types.CallToolResult(content=[
        types.TextContent(type="text", text="Multiple content types test:"),
        types.ImageContent(type="image", data=PNG, mime_type="image/png"),
        embedded("test://mixed-content-resource", "application/json", '{"test":"data","value":123}')])


async def error_handling(ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
    return text("This tool intentionally returns an error for testing", is_error=True)


async def with_logging(ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
    for step, message in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
        if step:
            await asyncio.sleep(0.05)
        await ctx.session.send_log_message("info", message, related_request_id=ctx.request_id)
    return text("Tool with logging executed successfully")


async def with_progress(ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
    for step, progress in enumerate((0, 50, 100)):
        if step:
            await asyncio.sleep(0.05)
        await ctx.session.report_progress(progress, 100, f"Completed step {progress} of 100")
    return text("Tool with progress executed successfully")


async def missing_capability(ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.sampling is None:
        raise MCPError(code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                       message="This tool requires the client 'sampling' capability",
                       data={"requiredCapabilities": {"sampling": {}}})
    return text("The client declared sampling.")


async def echo_region(ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
    return text(f"region={(params.arguments or {}).get('region', '<none>')}")


REGION_SCHEMA = schema({"region": {"type": "string", "x-mcp-header": "Region",
                                   "description": "Mirrored into the Mcp-Param-Region header"}})
SCHEMA_2020_12: dict[str, Any] = {  # every 2020-12 keyword the suite checks survives tools/list
    "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                          "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
                   "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                   "phone": {"type": "string"}, "email": {"type": "string"}},
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]}, "else": {"required": ["email"]}, "additionalProperties": False}


def toggle(name: str) -> None:
    """Add or remove one listed item, so a list_changed announces a real change (a gateway re-lists)."""
    dynamic.symmetric_difference_update({name})


async def trigger_tool_change(ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
    toggle("test_dynamic_tool")
    await ctx.session.send_tool_list_changed()
    return text("tool list changed")


async def trigger_prompt_change(ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
    toggle("test_dynamic_prompt")
    await ctx.session.send_prompt_list_changed()
    return text("prompt list changed")


def tool(name: str, handler: Callable[[Ctx, Any], Awaitable[ToolResult]],
         schema: dict[str, Any] | None = None) -> tuple[types.Tool, Callable[[Ctx, Any], Awaitable[ToolResult]]]:
    return types.Tool(name=name, description=f"Conformance fixture: {name}", input_schema=schema or OBJECT), handler


def string_argument(name: str) -> dict[str, Any]:
    return schema({name: {"type": "string"}}, [name])


TOOLS = dict((t.name, (t, h)) for t, h in [
    tool("test_simple_text", simple_text), tool("test_image_content", image_content),
    tool("test_audio_content", audio_content), tool("test_embedded_resource", embedded_resource),
    tool("test_multiple_content_types", multiple_content_types), tool("test_error_handling", error_handling),
    tool("test_tool_with_logging", with_logging), tool("test_logging_tool", with_logging),
    tool("test_tool_with_progress", with_progress), tool("test_missing_capability", missing_capability),
    tool("test_trigger_tool_change", trigger_tool_change), tool("test_x_mcp_header", echo_region, REGION_SCHEMA),
    tool("json_schema_2020_12_tool", simple_text, SCHEMA_2020_12),
    tool("test_trigger_prompt_change", trigger_prompt_change),
    tool("test_sampling", asked(sampled, lambda a: {"llm": sample_request(str(a.get("prompt", "")), 100)}),
         string_argument("prompt")),
    tool("test_elicitation", asked(elicited("User response"),
                                   lambda a: {"form": elicit_request(str(a.get("message", "")), CONTACT_SCHEMA)}),
         string_argument("message")),
    tool("test_elicitation_sep1034_defaults", asked(elicited("Elicitation completed"), lambda a: {
        "form": elicit_request("Please review your information", DEFAULTS_SCHEMA)})),
    tool("test_elicitation_sep1330_enums", asked(elicited("Elicitation completed"), lambda a: {
        "form": elicit_request("Please select options", ENUMS_SCHEMA)})),
    tool("test_streaming_elicitation", asked(elicited("Streamed"), lambda a: {"form": name_request()})),
    tool("test_input_required_result_elicitation", asked(greeted, lambda a: {"user_name": name_request()})),
    tool("test_input_required_result_sampling", asked(capital, lambda a: {
        "capital_question": sample_request("What is the capital of France?", 100)})),
    tool("test_input_required_result_list_roots", asked(roots_counted,
                                                        lambda a: {"client_roots": types.ListRootsRequest()})),
    tool("test_input_required_result_request_state", request_state),
    tool("test_input_required_result_multiple_inputs", multiple_inputs),
    tool("test_input_required_result_multi_round", multi_round),
    tool("test_input_required_result_tampered_state", tampered_state),
    tool("test_input_required_result_capabilities", capability_gated),
])


async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    extra = [tool("test_dynamic_tool", simple_text)[0]] if "test_dynamic_tool" in dynamic else []
    return types.ListToolsResult(tools=[*(definition for definition, _ in TOOLS.values()), *extra])


async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> ToolResult:
    if params.name == "test_dynamic_tool" and params.name in dynamic:
        return text("dynamic")
    if params.name not in TOOLS:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
    return await TOOLS[params.name][1](ctx, params)


# Prompts ------------------------------------------------------------------------------------

def user(content: Any) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


def say(value: str) -> types.PromptMessage:
    return user(types.TextContent(type="text", text=value))


CONTEXT_REQUEST = elicit_request("What context should the prompt use?", schema({"context": {"type": "string"}},
                                                                               ["context"]))
PROMPTS: dict[str, tuple[list[str], Callable[[dict[str, str]], list[types.PromptMessage]]]] = {
    "test_simple_prompt": ([], lambda a: [say("This is a simple prompt for testing.")]),
    "test_prompt_with_arguments": (["arg1", "arg2"], lambda a: [
        say(f"Prompt with arguments: arg1='{a['arg1']}', arg2='{a['arg2']}'")]),
    "test_prompt_with_embedded_resource": (["resourceUri"], lambda a: [
        user(embedded(a["resourceUri"], "text/plain", "Embedded resource content for testing.")),
        say("Please process the embedded resource above.")]),
    "test_prompt_with_image": ([], lambda a: [user(types.ImageContent(type="image", data=PNG, mime_type="image/png")),
                                              say("Please analyze the image above.")]),
    "test_input_required_result_prompt": ([], lambda a: [say(f"Use the following context: {a['context']}")]),
}


async def list_prompts(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[
        types.Prompt(name=name, description=f"Conformance fixture: {name}",
                     arguments=[types.PromptArgument(name=arg, required=True) for arg in args])
        for name, (args, _) in PROMPTS.items()] + [
        types.Prompt(name=name, description="Conformance fixture: toggled by test_trigger_prompt_change")
        for name in sorted(dynamic & {"test_dynamic_prompt"})])


PromptResult = types.GetPromptResult | types.InputRequiredResult


async def get_prompt(ctx: Ctx, params: types.GetPromptRequestParams) -> PromptResult:
    if params.name == "test_dynamic_prompt" and params.name in dynamic:
        return types.GetPromptResult(messages=[say("dynamic")])
    if params.name not in PROMPTS:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {params.name}")
    required, render = PROMPTS[params.name]
    arguments = dict(params.arguments or {})
    if missing := [arg for arg in required if arg not in arguments]:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Missing arguments: {', '.join(missing)}")
    if params.name == "test_input_required_result_prompt":
        answers = await ask(ctx, params, {"user_context": CONTEXT_REQUEST})
        if isinstance(answers, types.InputRequiredResult):
            return answers
        arguments["context"] = str(content_of(answers["user_context"]).get("context", "?"))
    return types.GetPromptResult(description=params.name, messages=render(arguments))


# Resources ----------------------------------------------------------------------------------

STATIC: dict[str, tuple[str, str, bytes | str]] = {
    "test://static-text": ("static-text", "text/plain", "This is the content of the static text resource."),
    "test://static-binary": ("static-binary", "image/png", base64.b64decode(PNG)),
    "test://watched-resource": ("watched-resource", "text/plain", "Watched resource content"),
}
TEMPLATE_PREFIX, TEMPLATE_SUFFIX = "test://template/", "/data"


async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[
        types.Resource(uri=uri, name=name, description=f"Conformance fixture: {name}", mime_type=mime)
        for uri, (name, mime, _) in STATIC.items()])


async def list_templates(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
    template = types.ResourceTemplate(uri_template=f"{TEMPLATE_PREFIX}{{id}}{TEMPLATE_SUFFIX}", name="template",
                                      description="Conformance fixture: data for one id", mime_type="application/json")
    return types.ListResourceTemplatesResult(resource_templates=[template])


def contents(uri: str) -> types.TextResourceContents | types.BlobResourceContents:
    if uri in STATIC:
        _, mime, body = STATIC[uri]
        if isinstance(body, bytes):
            return types.BlobResourceContents(uri=uri, mime_type=mime, blob=base64.b64encode(body).decode())
        return types.TextResourceContents(uri=uri, mime_type=mime, text=body)
    ident = uri.removeprefix(TEMPLATE_PREFIX).removesuffix(TEMPLATE_SUFFIX)
    if uri.startswith(TEMPLATE_PREFIX) and uri.endswith(TEMPLATE_SUFFIX) and ident and "/" not in ident:
        body = json.dumps({"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"}, separators=(",", ":"))
        return types.TextResourceContents(uri=uri, mime_type="application/json", text=body)
    raise MCPError(code=types.INVALID_PARAMS, message="Resource not found", data={"uri": uri})


async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    return types.ReadResourceResult(contents=[contents(params.uri)])


async def subscribe(ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
    subscriptions.add(params.uri)
    return types.EmptyResult()


async def unsubscribe(ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    subscriptions.discard(params.uri)
    return types.EmptyResult()


async def complete(ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
    """Values from a small fixed list that start with what was typed."""
    values = [word for word in ("paris", "park", "party") if word.startswith(params.argument.value)]
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))


async def set_level(ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()  # handshake-era logging: accepted; this fixture logs only at info


def build() -> Server[Any]:
    server: Server[Any] = Server(
        "conformance-fixture", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool,
        on_list_prompts=list_prompts, on_get_prompt=get_prompt, on_list_resources=list_resources,
        on_list_resource_templates=list_templates, on_read_resource=read_resource,
        on_subscribe_resource=subscribe, on_unsubscribe_resource=unsubscribe, on_completion=complete,
        on_set_logging_level=set_level)
    # Seals requestState (2026-07-28), so a tampered one is refused before a tool sees it.
    server.middleware.append(RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=server.name))
    return server


if __name__ == "__main__":
    runner.main(build(), description="The MCP conformance suite's backend")
