"""The conformance fixture's tools that ask the client: elicitation, sampling, roots.

Each question is asked in the era of the connection: a real server-to-client request on a
handshake-era session, or an `InputRequiredResult` at 2026-07-28 (the client answers in its retry).
The keys, messages and schemas are the ones the conformance scenarios check.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

Ctx = ServerRequestContext[Any, Any]
ToolResult = types.CallToolResult | types.InputRequiredResult
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}



def text(value: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)], is_error=is_error)


def elicit_request(message: str, schema: dict[str, Any]) -> types.ElicitRequest:
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def sample_request(prompt: str, max_tokens: int) -> types.CreateMessageRequest:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
    return types.CreateMessageRequest(params=types.CreateMessageRequestParams(messages=[message],
                                                                              max_tokens=max_tokens))


RESULT_TYPES: dict[str, type[types.Result]] = {"elicitation/create": types.ElicitResult,
                                               "sampling/createMessage": types.CreateMessageResult,
                                               "roots/list": types.ListRootsResult}


def modern(ctx: Ctx) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


async def ask(ctx: Ctx, params: Any, requests: dict[str, types.InputRequest],
              state: str | None = None) -> dict[str, Any] | types.InputRequiredResult:
    """The client's answers, keyed like `requests`; at 2026 an InputRequiredResult until it sent them."""
    if not modern(ctx):
        return {key: await ctx.session.send_request(request, RESULT_TYPES[request.method],
                                                    metadata=ServerMessageMetadata(related_request_id=ctx.request_id))
                for key, request in requests.items()}
    answers = getattr(params, "input_responses", None) or {}
    if all(key in answers for key in requests):
        return answers
    return types.InputRequiredResult(input_requests=requests, request_state=state)


def content_of(answer: Any) -> dict[str, Any]:
    return dict(getattr(answer, "content", None) or {}) if isinstance(answer, types.ElicitResult) else {}


# Tools that ask the client ------------------------------------------------------------------

def schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, **({"required": required} if required else {})}


CONTACT_SCHEMA = schema({"username": {"type": "string", "description": "User's response"},
                          "email": {"type": "string", "description": "User's email address"}},
                         ["username", "email"])
DEFAULTS_SCHEMA = schema({
    "name": {"type": "string", "default": "John Doe"}, "age": {"type": "integer", "default": 30},
    "score": {"type": "number", "default": 95.5},
    "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
    "verified": {"type": "boolean", "default": True}})
ENUMS_SCHEMA = schema({
    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
    "titledSingle": {"type": "string", "oneOf": [{"const": f"value{i}", "title": f"{word} Option"}
                                                 for i, word in ((1, "First"), (2, "Second"), (3, "Third"))]},
    "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                   "enumNames": ["Option One", "Option Two", "Option Three"]},
    "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
    "titledMulti": {"type": "array", "items": {"anyOf": [{"const": f"value{i}", "title": f"{word} Choice"}
                                                         for i, word in ((1, "First"), (2, "Second"),
                                                                         (3, "Third"))]}}})


def asked(handler: Callable[[Ctx, Any, dict[str, Any]], ToolResult],
          requests: Callable[[Any], dict[str, types.InputRequest]]) -> Callable[[Ctx, Any], Awaitable[ToolResult]]:
    """A tool that asks `requests(arguments)` and answers with `handler(ctx, params, answers)`."""
    async def tool(ctx: Ctx, params: Any) -> ToolResult:
        try:
            answers = await ask(ctx, params, requests(params.arguments or {}))
        except MCPError as exc:  # the client did not declare the capability, or refused
            return text(f"The client could not answer: {exc.error.message}", is_error=True)
        return answers if isinstance(answers, types.InputRequiredResult) else handler(ctx, params, answers)
    return tool


def elicited(label: str) -> Callable[[Ctx, Any, dict[str, Any]], ToolResult]:
    def handler(ctx: Ctx, params: Any, answers: dict[str, Any]) -> ToolResult:
        answer = answers["form"]
        return text(f"{label}: action={answer.action}, content={json.dumps(content_of(answer))}")
    return handler


def sampled(ctx: Ctx, params: Any, answers: dict[str, Any]) -> ToolResult:
    content = answers["llm"].content
    return text(f"LLM response: {content.text if content.type == 'text' else 'No response'}")


def greeted(ctx: Ctx, params: Any, answers: dict[str, Any]) -> ToolResult:
    return text(f"Hello, {content_of(answers['user_name']).get('name', 'stranger')}!")


def roots_counted(ctx: Ctx, params: Any, answers: dict[str, Any]) -> ToolResult:
    return text(f"Client exposed {len(answers['client_roots'].roots)} root(s).")


def capital(ctx: Ctx, params: Any, answers: dict[str, Any]) -> ToolResult:
    content = answers["capital_question"].content
    return text(f"Model said: {content.text if content.type == 'text' else '?'}")


def done(message: str) -> Callable[[Ctx, Any, dict[str, Any]], ToolResult]:
    return lambda ctx, params, answers: text(message)


def name_request(message: str = "What is your name?") -> types.ElicitRequest:
    return elicit_request(message, NAME_SCHEMA)


CONFIRM = elicit_request("Please confirm", schema({"ok": {"type": "boolean"}}, ["ok"]))
COLOR = elicit_request("Step 2: What is your favorite color?", schema({"color": {"type": "string"}}, ["color"]))
ALL_INPUTS: dict[str, types.InputRequest] = {"user_name": name_request(),
                                             "greeting": sample_request("Generate a greeting", 50),
                                             "client_roots": types.ListRootsRequest()}


async def with_state(ctx: Ctx, params: Any, requests: dict[str, types.InputRequest], state: str,
                     finish: str) -> ToolResult:
    """Round 1 asks with `state`; the retry must echo it (the boundary has unsealed it by now)."""
    answers = await ask(ctx, params, requests, state)
    if isinstance(answers, types.InputRequiredResult):
        return answers
    if modern(ctx) and params.request_state != state:
        return types.InputRequiredResult(input_requests=requests, request_state=state)
    return text(finish)


async def request_state(ctx: Ctx, params: Any) -> ToolResult:
    return await with_state(ctx, params, {"confirm": CONFIRM}, "confirm-round-1", "state-ok: confirmed")


async def multiple_inputs(ctx: Ctx, params: Any) -> ToolResult:
    return await with_state(ctx, params, ALL_INPUTS, "multiple-inputs", "All inputs received.")


async def tampered_state(ctx: Ctx, params: Any) -> ToolResult:
    return await with_state(ctx, params, {"confirm": CONFIRM}, "tamper-round-1", "state-ok: untampered")


async def multi_round(ctx: Ctx, params: Any) -> ToolResult:
    """Three rounds: the name, then the colour, then the answer; the state says which round it is."""
    if not modern(ctx):
        name = content_of((await ask(ctx, params, {"step1": name_request()}))["step1"]).get("name")
        color = content_of((await ask(ctx, params, {"step2": COLOR}))["step2"]).get("color")
        return text(f"{name} likes {color}.")
    state = json.loads(params.request_state) if params.request_state else {"round": 1}
    answers = params.input_responses or {}
    if state["round"] == 2 and "step2" in answers:
        return text(f"{state.get('name')} likes {content_of(answers['step2']).get('color')}.")
    if state["round"] == 1 and "step1" in answers:
        name = content_of(answers["step1"]).get("name")
        return types.InputRequiredResult(input_requests={"step2": COLOR},
                                         request_state=json.dumps({"round": 2, "name": name}))
    return types.InputRequiredResult(input_requests={"step1": name_request("Step 1: What is your name?")},
                                     request_state=json.dumps({"round": 1}))


async def capability_gated(ctx: Ctx, params: Any) -> ToolResult:
    capabilities = ctx.session.client_capabilities or types.ClientCapabilities()
    requests: dict[str, types.InputRequest] = {}
    if capabilities.sampling is not None:
        requests["sample"] = sample_request("Say hello", 50)
    if capabilities.elicitation is not None:
        requests["ask"] = name_request()
    if not requests:
        return text("The client declared neither sampling nor elicitation.")
    answers = await ask(ctx, params, requests, "capability-gated")
    return answers if isinstance(answers, types.InputRequiredResult) else text("Inputs received.")
