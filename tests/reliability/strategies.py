"""Hypothesis strategies for hostile JSON-RPC input (not a test module)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

METHODS = ("initialize", "ping", "tools/list", "tools/call", "notifications/initialized", "notifications/cancelled",
           "resources/list", "prompts/get", "logging/setLevel", "", "prompts/list", "resources/read",
           "resources/templates/list", "completion/complete")
TOOL_NAMES = ("echo__echo", "echo__strict", "echo__nope", "other__echo", "", "echo__", "__echo", "echo__p")
URIS = ("echo+r://1", "echo+r://{x}", "echo+", "+r://1", "r://1", "echo+r://" + "{+a}" * 50, "other+r://1")

# What orjson can hand us: no NaN or infinity, integers within 64 bits (bigger ones arrive as floats).
scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40))
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=25,
)
ids = st.integers(min_value=-(2**63), max_value=2**64 - 1) | st.text(max_size=30) | scalars | json_values


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


deep_values = st.integers(min_value=200, max_value=254).map(nested)  # as deep as can still be encoded
big_strings = st.integers(min_value=10_000, max_value=200_000).map(lambda n: "x" * n)

call_params = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(TOOL_NAMES) | json_values | deep_values | big_strings,
        "arguments": json_values | deep_values | st.dictionaries(st.text(max_size=5), json_values | deep_values),
        "_meta": json_values | st.fixed_dictionaries({"progressToken": json_values}),
        "cursor": json_values,
        "uri": st.sampled_from(URIS) | json_values | big_strings,
        "ref": json_values | st.fixed_dictionaries({"type": st.sampled_from(("ref/prompt", "ref/resource"))},
                                                   optional={"name": st.sampled_from(TOOL_NAMES) | json_values,
                                                             "uri": st.sampled_from(URIS) | json_values}),
        "argument": json_values,
    },
)
params = json_values | call_params | deep_values | st.fixed_dictionaries({"cursor": json_values | big_strings})

messages = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0") | scalars},
    optional={
        "id": ids,
        "method": st.sampled_from(METHODS) | st.text(max_size=30) | big_strings | json_values,
        "params": params,
        "result": json_values,
        "error": json_values,
    },
)
well_formed_calls = st.builds(
    lambda i, name, args: {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name,
                                                                                        "arguments": args}},
    st.integers(min_value=0, max_value=2**53),
    st.sampled_from(TOOL_NAMES),
    st.dictionaries(st.text(max_size=5), json_values | deep_values),
)
valid_ids = st.integers(min_value=-(2**63), max_value=2**64 - 1) | st.text(max_size=30)
envelopes = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "method": st.sampled_from(METHODS)},
    optional={"id": valid_ids, "params": call_params | st.dictionaries(st.text(max_size=8), json_values, max_size=4)},
)
any_message = st.one_of(envelopes, envelopes, well_formed_calls, well_formed_calls, messages, json_values)  # weighted


# ---------------------------------------------------------------- 2026-07-28 requests

MODERN = "2026-07-28"
ENVELOPE_KEYS = {"version": "io.modelcontextprotocol/protocolVersion",
                 "capabilities": "io.modelcontextprotocol/clientCapabilities",
                 "info": "io.modelcontextprotocol/clientInfo", "level": "io.modelcontextprotocol/logLevel"}
MODERN_METHODS = ("server/discover", "tools/call", "tools/list", "prompts/get", "resources/read", "initialize",
                  "ping", "resources/subscribe", "completion/complete", "tasks/get", "tasks/cancel", "bogus/method")
"""Not subscriptions/listen: a valid one is a stream that stays open (test_stateless_http covers it)."""
header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40)
VALID_ENVELOPE = {ENVELOPE_KEYS["version"]: MODERN, ENVELOPE_KEYS["capabilities"]: {},
                  ENVELOPE_KEYS["info"]: {"name": "hostile", "version": "1"}}
ENVELOPE_VARIANTS = {
    ENVELOPE_KEYS["version"]: st.sampled_from(["2025-11-25", "2099-01-01", ""]) | json_values,
    ENVELOPE_KEYS["capabilities"]: st.sampled_from([{"sampling": {}}, {"extensions": {"x": {}}}]) | json_values,
    ENVELOPE_KEYS["info"]: json_values,
    ENVELOPE_KEYS["level"]: st.sampled_from(["debug", "error", "loud"]) | json_values,
    "progressToken": json_values,
    "traceparent": st.just("00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01") | header_text,
}
PARAM_VARIANTS = {
    "name": st.sampled_from(["calc__add", "calc__nope", ""]) | json_values,
    "arguments": st.just({"a": 1, "b": 2}) | json_values,
    "uri": st.sampled_from(["calc+calc://x", "nope://"]) | json_values,
    "taskId": header_text | json_values,
    "requestState": header_text | json_values,
    "inputResponses": json_values,
}


def mostly(usual: Any, odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`usual` three times in four, else something from `odd`."""
    return st.one_of(st.just(usual), st.just(usual), st.just(usual), odd)


@st.composite
def _varied(draw: st.DrawFn, base: dict[str, Any], variants: dict[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    """`base` with some keys dropped and some set to a variant (each key: as it is, mostly)."""
    out = dict(base)
    for key, variant in variants.items():
        choice = draw(st.sampled_from(["keep", "keep", "keep", "drop", "vary"]))
        if choice == "drop":
            out.pop(key, None)
        elif choice == "vary":
            out[key] = draw(variant)
    return out


@st.composite
def modern_requests(draw: st.DrawFn) -> tuple[Any, dict[str, str]]:
    """A 2026 request, mostly well formed but broken anywhere, and its routing headers: mostly the
    body's, sometimes others or none. Not subscriptions/listen: a valid one stays open as a stream."""
    method = draw(mostly("tools/call", st.sampled_from(MODERN_METHODS) | json_values))
    meta = draw(mostly(VALID_ENVELOPE, _varied(VALID_ENVELOPE, ENVELOPE_VARIANTS) | json_values))
    call = {"name": "calc__add", "arguments": {"a": 1, "b": 2}}
    params = draw(mostly(call, _varied(call, PARAM_VARIANTS)) | json_values)
    if isinstance(params, dict):
        params = {**params, "_meta": meta}
    message = {"jsonrpc": "2.0", "id": draw(mostly(7, valid_ids | json_values)), "method": method, "params": params}
    if draw(st.integers(0, 9)) == 0:
        del message["id"]
    version = meta.get(ENVELOPE_KEYS["version"]) if isinstance(meta, dict) else None
    name = next((params[key] for key in ("name", "uri", "taskId") if key in params), None) if isinstance(
        params, dict) else None
    headers = {}
    for header, body_value in (("MCP-Protocol-Version", version), ("Mcp-Method", method), ("Mcp-Name", name)):
        choice = draw(st.sampled_from(["body", "body", "body", "other", "none"]))
        if choice == "body" and isinstance(body_value, str) and body_value.isascii() and body_value.isprintable():
            headers[header] = body_value
        elif choice == "other":
            headers[header] = draw(header_text)
    if "MCP-Protocol-Version" not in headers and draw(st.booleans()):
        headers["MCP-Protocol-Version"] = MODERN  # mostly the 2026 path, whatever the body says
    return message, headers
