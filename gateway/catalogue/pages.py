"""Pre-encoded list pages and the opaque cursors that name them. Pure.

A cursor names the view it was issued by (a tenant's view of one kind in one catalogue
version) and an offset, so a cursor from another tenant, kind or version is refused.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.errors import InvalidParams


@dataclass(frozen=True, slots=True)
class Cursor:
    view: str
    offset: int


def encode_pages(view_id: str, items: Sequence[bytes], result_key: str, page_size: int) -> list[orjson.Fragment]:
    """`{"<result_key>":[…],"nextCursor":…}` pages joined from each item's JSON (no list: one empty page)."""
    head = b'{"' + result_key.encode() + b'":['
    pages = []
    for start in range(0, len(items), page_size) or range(1):
        end = start + page_size
        more = b""
        if end < len(items):
            more = b',"nextCursor":' + orjson.dumps(encode_cursor(Cursor(view_id, end)))
        pages.append(orjson.Fragment(b"".join((head, b",".join(items[start:end]), b"]", more, b"}"))))
    return pages


def page_at(pages: Sequence[orjson.Fragment], view_id: str, page_size: int, cursor: Any) -> orjson.Fragment:
    """The page a cursor names (None = the first); -32602 for a cursor this view did not issue."""
    if cursor is None:
        return pages[0]
    parsed = decode_cursor(cursor)
    if parsed is None or parsed.view != view_id or parsed.offset % page_size:
        raise InvalidParams("Invalid cursor")
    index = parsed.offset // page_size
    if not 0 < index < len(pages):
        raise InvalidParams("Invalid cursor")
    return pages[index]


def encode_cursor(cursor: Cursor) -> str:
    raw = orjson.dumps({"v": cursor.view, "o": cursor.offset})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: Any) -> Cursor | None:
    if not isinstance(text, str) or len(text) > 200:
        return None
    try:
        data = orjson.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    view, offset = data.get("v"), data.get("o")
    if not isinstance(view, str) or not isinstance(offset, int) or isinstance(offset, bool):
        return None
    return Cursor(view, offset)
