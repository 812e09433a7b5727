"""List pages joined from their items' JSON, and the opaque cursors that name them.

A cursor names the view it was issued by (a tenant's view of one kind in one catalogue
version) and an offset, so a cursor from another tenant, kind or version is refused.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, overload

import orjson

from gateway.catalogue.page_cache import PageCache
from gateway.protocol.errors import InvalidParams

JOINED = PageCache()
"""The pages of every view, joined when first served; a view's are dropped with the view."""
_views = itertools.count()


@dataclass(frozen=True, slots=True)
class Cursor:
    view: str
    offset: int


class Pages(Sequence[orjson.Fragment]):
    """`{"<result_key>":[…],"nextCursor":…}` pages of one view, joined from its items' JSON when served.

    The items' bytes are the catalogue's own, shared by every view that lists them, so a view holds
    references, not a copy of the JSON: with thousands of tenants whose views differ by a tool, the
    copies were most of the gateway's memory. The pages served most stay joined in JOINED.
    """

    __slots__ = ("__weakref__", "_count", "_head", "_items", "_page_size", "_token", "_view_id")

    def __init__(self, view_id: str, items: Sequence[bytes], result_key: str, page_size: int) -> None:
        self._items = tuple(items)
        self._head = b'{"' + result_key.encode() + b'":['
        self._view_id = view_id
        self._page_size = page_size
        self._count = max(1, -(-len(self._items) // page_size))  # no items: one empty page
        self._token = next(_views)
        weakref.finalize(self, _forget, self._token, self._count)

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> orjson.Fragment: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[orjson.Fragment]: ...
    def __getitem__(self, index: int | slice) -> orjson.Fragment | Sequence[orjson.Fragment]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(index)
        key = (self._token, index)
        page = JOINED.get(key)
        return page if page is not None else JOINED.put(key, self._join(index))

    def _join(self, index: int) -> bytes:
        start = index * self._page_size
        end = start + self._page_size
        more = b""
        if end < len(self._items):
            more = b',"nextCursor":' + orjson.dumps(encode_cursor(Cursor(self._view_id, end)))
        return b"".join((self._head, b",".join(self._items[start:end]), b"]", more, b"}"))


def _forget(token: int, count: int) -> None:
    for index in range(count):
        JOINED.drop((token, index))


def encode_pages(view_id: str, items: Sequence[bytes], result_key: str, page_size: int) -> Pages:
    """The pages of `items` (each one's JSON), `page_size` to a page; each is joined when served."""
    return Pages(view_id, items, result_key, page_size)


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
