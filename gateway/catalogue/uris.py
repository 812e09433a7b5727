"""Gateway URIs: a backend's resource URI as clients see it, and back. Pure.

A backend's `uri` becomes `{namespace}+{uri}`; a backend with `namespace: ""` keeps its URIs
as they are. Namespaces never contain `+`, so the first `+` of a gateway URI ends the namespace
and everything after it is the backend's URI, byte for byte. URI templates get the same
prefix, so whatever a template expands to is again a gateway URI that routes to its backend.

Every URI is rewritten, `https://` ones too: a client reads them through the gateway (which
applies the tenant's policy and the backend's credentials) and never fetches them itself.

MCP Apps' `_meta.ui.resourceUri` on tools and tool results is rewritten the same way.

The `rewrite_*` functions change a reply in place: the dispatcher decodes each backend reply
for one client only, so nothing else holds it.
"""

from __future__ import annotations

import re
from typing import Any

SEPARATOR = "+"
"""Between the namespace and the backend's URI (not allowed in namespaces)."""

_EXPRESSION = re.compile(r"\{([+#./;?&]?)[^{}]*\}")
_EXPANSIONS = {
    "": r"[^/?#]*",  # simple string expansion: one path segment's worth
    "+": r"[^#]*",  # reserved expansion may hold slashes
    "#": r"(?:#.*)?",
    ".": r"(?:\.[^/?#]*)?",
    "/": r"(?:/[^?#]*)?",
    ";": r"(?:;[^/?#]*)?",
    "?": r"(?:\?[^#]*)?",
    "&": r"(?:&[^#]*)?",
}

JsonObject = dict[str, Any]


def gateway_uri(namespace: str, uri: str) -> str:
    """The URI (or URI template) clients see for a backend's own."""
    return f"{namespace}{SEPARATOR}{uri}" if namespace else uri


def split(uri: str) -> tuple[str, str] | None:
    """(namespace, the backend's URI) of a gateway URI, split at its first `+`; None without one."""
    namespace, separator, original = uri.partition(SEPARATOR)
    return (namespace, original) if separator else None


def template_pattern(template: str) -> re.Pattern[str]:
    """A pattern for the URIs an RFC 6570 template expands to: loose, for routing, not validation.

    Expressions with no literal between them match as one run of anything, so a pattern never
    holds two wildcards side by side (whose backtracking would grow with the square of the URI).
    """
    parts, end = [], 0
    for match in _EXPRESSION.finditer(template):
        literal = template[end:match.start()]
        if not literal and parts and end:  # follows another expression directly
            parts[-1] = ".*"
        else:
            parts += [re.escape(literal), _EXPANSIONS[match.group(1)]]
        end = match.end()
    parts.append(re.escape(template[end:]))
    return re.compile("".join(parts), re.DOTALL)


# ---------------------------------------------------------------- URIs inside replies


def rewrite_contents(result: Any, namespace: str) -> None:
    """`resources/read`: every `contents[].uri` becomes a gateway URI."""
    contents = result.get("contents") if isinstance(result, dict) and namespace else None
    if isinstance(contents, list):
        for item in contents:
            _prefix(item, "uri", namespace)


def rewrite_blocks(blocks: Any, namespace: str) -> None:
    """Content blocks (tool results, prompt messages): `resource_link.uri`, `resource.resource.uri`."""
    if not isinstance(blocks, list) or not namespace:
        return
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "resource_link":
            _prefix(block, "uri", namespace)
        elif kind == "resource":
            _prefix(block.get("resource"), "uri", namespace)


def rewrite_messages(result: Any, namespace: str) -> None:
    """`prompts/get`: the URIs in each message's content (one block, or a list of them)."""
    messages = result.get("messages") if isinstance(result, dict) and namespace else None
    if not isinstance(messages, list):
        return
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        rewrite_blocks([content] if isinstance(content, dict) else content, namespace)


def rewrite_ui_meta(meta: Any, namespace: str) -> bool:
    """MCP Apps: a tool's (or a tool result's) `_meta.ui.resourceUri` names a `ui://` resource of the
    same backend, as does the older flat `_meta["ui/resourceUri"]`. Whether anything was rewritten."""
    if not isinstance(meta, dict) or not namespace:
        return False
    nested = _prefix(meta.get("ui"), "resourceUri", namespace)
    return _prefix(meta, "ui/resourceUri", namespace) or nested


def _prefix(item: Any, key: str, namespace: str) -> bool:
    if isinstance(item, dict) and isinstance(item.get(key), str):
        item[key] = gateway_uri(namespace, item[key])
        return True
    return False
