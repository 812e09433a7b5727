"""gateway.catalogue.page_cache and the pages built on it: joined pages under one byte budget."""

from __future__ import annotations

import gc

import orjson

from gateway.catalogue.page_cache import PageCache
from gateway.catalogue.pages import JOINED, Pages


def test_the_least_recently_served_page_goes_first_past_the_budget() -> None:
    cache = PageCache(max_bytes=10)
    cache.put("a", b"aaaa")
    cache.put("b", b"bbbb")
    assert orjson.dumps(cache.get("a")) == b"aaaa"  # now the most recent
    cache.put("c", b"cccc")
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("c") is not None
    assert (len(cache), cache.bytes) == (2, 8)


def test_a_page_over_the_whole_budget_is_served_but_not_kept() -> None:
    cache = PageCache(max_bytes=10)
    cache.put("a", b"aaaa")
    assert orjson.dumps(cache.put("big", b"x" * 11)) == b"x" * 11
    assert cache.get("big") is None and cache.get("a") is not None


def test_putting_a_key_again_replaces_it_and_counts_it_once() -> None:
    cache = PageCache(max_bytes=100)
    cache.put("a", b"aaaa")
    cache.put("a", b"aa")
    assert (len(cache), cache.bytes) == (1, 2)
    cache.drop("a")
    cache.drop("never there")
    assert (len(cache), cache.bytes) == (0, 0)


def test_a_served_page_is_kept_until_its_view_is_gone() -> None:
    items = [orjson.dumps({"name": f"t{i}"}) for i in range(5)]
    pages = Pages("view", items, "tools", page_size=2)
    first = pages[0]
    assert pages[0] is first  # joined once, then served as kept
    assert orjson.loads(orjson.dumps(pages[2])) == {"tools": [{"name": "t4"}]}
    held = JOINED.bytes
    del pages, first
    gc.collect()
    assert JOINED.bytes < held  # the view's pages went with it
