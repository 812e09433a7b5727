"""2026-07-28 routing headers: the header form of values, and `Mcp-Param-*` against a tool's schema. Pure.

A client repeats parts of the body as headers so intermediaries can route without parsing it
(`Mcp-Method`, `Mcp-Name`, and `Mcp-Param-X` for each tools/call argument whose inputSchema
property says `"x-mcp-header": "X"`). A server that reads the body must check that they agree
(../shared/PROTOCOL-2026.md §A.3). Values that would not survive as a header (non-ASCII, edge
whitespace, control characters) travel as `=?base64?<utf-8 bytes in base64>?=`.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from multidict import MultiMapping, istr

from gateway.protocol import spec

VERSION_KEY, METHOD_KEY, NAME_KEY = istr(spec.VERSION_HEADER), istr(spec.METHOD_HEADER), istr(spec.NAME_HEADER)
"""Header names in multidict's case-folded form: a lookup with one costs a third of one with a str."""

Path = tuple[str, ...]
"""Property names from the schema's root down to one argument (via `properties` only)."""

HeaderParams = dict[Path, tuple[str, str]]
"""An argument's path → (its header token, its JSON type)."""

_BASE64_FORM = re.compile(r"=\?base64\?(.*)\?=", re.DOTALL)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An RFC 9110 token: what a header name may be made of."""
_HEADER_TYPES = frozenset({"string", "integer", "boolean"})
"""The only property types an `x-mcp-header` may sit on (`number` is excluded: float text is not portable)."""
_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")

_SCHEMA_MAPS = frozenset({"patternProperties", "dependentSchemas", "$defs", "definitions"})
_SUBSCHEMAS = _SCHEMA_MAPS | frozenset({
    "items", "contains", "additionalProperties", "unevaluatedItems", "unevaluatedProperties", "propertyNames",
    "not", "if", "then", "else", "contentSchema", "allOf", "anyOf", "oneOf", "prefixItems"})
"""JSON Schema keywords whose values are schemas; instance data (`default`, `const`, …) is never entered."""


def header_value(raw: str | None) -> str | None:
    """The value a header stands for: whitespace around it trimmed, the base64 form decoded.

    None when absent, or when the base64 form is malformed (so it can never match a body value).
    """
    if raw is None:
        return None
    value = raw.strip(" \t")
    wrapped = _BASE64_FORM.fullmatch(value)
    if wrapped is None:
        return value
    try:
        decoded = base64.b64decode(wrapped[1], validate=True)
        if base64.b64encode(decoded).decode() != wrapped[1]:
            return None  # not the canonical form any encoder writes
        return decoded.decode()
    except ValueError:  # binascii.Error, UnicodeDecodeError, or a non-ASCII payload
        return None


def header_params(schema: Any) -> HeaderParams | None:
    """The arguments a tools/call must repeat as `Mcp-Param-*` headers; None when an annotation is invalid.

    Clients drop a tool with an invalid annotation, so its headers are never checked.
    """
    found: HeaderParams = {}
    seen: set[str] = set()
    for path, prop in _annotated(schema):
        token, kind = prop[spec.X_MCP_HEADER], prop.get("type")
        if not path or not isinstance(token, str) or not _TOKEN.fullmatch(token) or kind not in _HEADER_TYPES:
            return None
        if token.lower() in seen:
            return None
        seen.add(token.lower())
        found[path] = (token, kind)
    return found


def _annotated(schema: Any) -> Iterator[tuple[Path | None, dict[str, Any]]]:
    """Every annotated schema position, with its path while only `properties` led there (else None)."""
    stack: list[tuple[Path | None, Any]] = [((), schema)]
    while stack:  # a stack, not recursion: a hostile schema may nest deeply
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        if spec.X_MCP_HEADER in node:
            yield path, node
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                stack.extend(((*path, name) if path is not None else None, sub) for name, sub in value.items())
            elif key in _SUBSCHEMAS:
                subs = value.values() if key in _SCHEMA_MAPS and isinstance(value, dict) else (
                    value if isinstance(value, list) else (value,))
                stack.extend((None, sub) for sub in subs)


def param_mismatch(params: HeaderParams, arguments: Mapping[str, Any], headers: MultiMapping[str]) -> str | None:
    """Why the `Mcp-Param-*` headers disagree with the arguments, or None when they agree.

    Header and argument must be present together (a null argument counts as absent) and equal.
    """
    for path, (token, kind) in params.items():
        name = spec.PARAM_HEADER_PREFIX + token
        raws = headers.getall(name, [])
        if len(raws) > 1:
            return f"{name} header appears more than once"
        problem = _disagreement(name, kind, _argument(arguments, path), raws[0] if raws else None)
        if problem:
            return f"{problem} (argument {'.'.join(path)!r})"
    return None


def _disagreement(name: str, kind: str, value: Any, raw: str | None) -> str | None:
    rendered = _rendered(value)
    if rendered is None:
        return f"{name} header is present but the argument is not" if raw is not None else None
    if raw is None:
        return f"{name} header is missing"
    decoded = header_value(raw)
    if decoded is None:
        return f"{name} header is malformed"
    return None if _same(kind, value, rendered, decoded) else f"{name} header does not match the argument"


def _argument(arguments: Mapping[str, Any], path: Path) -> Any:
    node: Any = arguments
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _rendered(value: Any) -> str | None:
    """An argument as a client writes it in a header (None: it has no header form)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        try:
            return str(value)
        except ValueError:  # an integer beyond Python's digit limit
            return None
    return None


def _same(kind: str, value: Any, rendered: str, decoded: str) -> bool:
    """Integers compare as numbers (`42` and `42.0` agree), everything else as text."""
    if kind != "integer" or isinstance(value, bool) or not isinstance(value, int | float):
        return decoded == rendered
    if not _DECIMAL.fullmatch(decoded) or (isinstance(value, float) and not value.is_integer()):
        return decoded == rendered
    whole, _, fraction = decoded.partition(".")
    return not fraction.strip("0") and int(whole) == int(value)


@lru_cache(maxsize=1024)
def header_form(value: str) -> str:
    """How a value travels as a header: as it is when it survives one, else the base64 form.

    Cached: the values are mostly tool names and URIs, sent again and again."""
    if value and value.isascii() and value.isprintable() and value == value.strip(" \t") \
            and not _BASE64_FORM.fullmatch(value):
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


def param_headers(params: HeaderParams, arguments: Mapping[str, Any]) -> dict[str, str]:
    """The `Mcp-Param-*` headers a tools/call with `arguments` carries (present, non-null ones only)."""
    headers = {}
    for path, (token, _kind) in params.items():
        rendered = _rendered(_argument(arguments, path))
        if rendered is not None:
            headers[spec.PARAM_HEADER_PREFIX + token] = header_form(rendered)
    return headers
