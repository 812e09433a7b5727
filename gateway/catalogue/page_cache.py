"""Encoded list pages kept under one byte budget, the least recently served dropped first.

Views hold their items' JSON by reference (pages.Pages) and join a page when it is served; the
pages served most stay joined here. The budget bounds the memory of every tenant's pages
together, however many tenants there are; a page dropped is joined again when next asked.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

import orjson

MAX_PAGE_BYTES = 32 * 1024 * 1024
"""The budget of each cache: a few hundred pages of a hundred large tools."""


class PageCache:
    """Encoded pages by key, within `max_bytes` (one page larger than that is served, not kept)."""

    def __init__(self, max_bytes: int = MAX_PAGE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._pages: OrderedDict[Hashable, tuple[orjson.Fragment, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._pages)

    def get(self, key: Hashable) -> orjson.Fragment | None:
        found = self._pages.get(key)
        if found is None:
            return None
        self._pages.move_to_end(key)
        return found[0]

    def put(self, key: Hashable, encoded: bytes) -> orjson.Fragment:
        """Keep `encoded` under `key`, dropping the least recently served past the budget; its fragment."""
        page = orjson.Fragment(encoded)
        size = len(encoded)
        if size > self.max_bytes:
            return page
        old = self._pages.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        self._pages[key] = (page, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, dropped) = self._pages.popitem(last=False)
            self.bytes -= dropped
        return page

    def drop(self, key: Hashable) -> None:
        found = self._pages.pop(key, None)
        if found is not None:
            self.bytes -= found[1]

    def clear(self) -> None:
        self._pages.clear()
        self.bytes = 0
