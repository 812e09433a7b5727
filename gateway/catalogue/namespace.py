"""Exposed tool names: `namespace + separator + tool`, always a valid MCP tool name. Pure."""

from __future__ import annotations

import hashlib
import re

from gateway.protocol.spec import MAX_TOOL_NAME, TOOL_NAME

_INVALID = re.compile(r"[^A-Za-z0-9_.-]")
_HASH_CHARS = 8


def exposed_name(namespace: str, separator: str, tool: str) -> str:
    """The name clients see for `tool` of a backend.

    A name that is too long or holds characters outside `[A-Za-z0-9_.-]` is rewritten
    deterministically: invalid characters become `_`, the result is cut, and a short hash
    of the original full name is appended, so two different originals never meet.
    """
    name = f"{namespace}{separator}{tool}" if namespace else tool
    if TOOL_NAME.fullmatch(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    clean = _INVALID.sub("_", name)[: MAX_TOOL_NAME - _HASH_CHARS - 1]
    return f"{clean}_{digest}"
