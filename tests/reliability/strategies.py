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
