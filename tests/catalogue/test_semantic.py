"""The semantic ranking (catalogue/semantic.py) and its fusion with BM25 (catalogue/search.py), with a
stand-in encoder: the real model is the `semantic` extra's, not installed for the tests."""

from __future__ import annotations

import zlib

import numpy as np

from bench.search.__main__ import catalogue
from gateway.catalogue.search import SearchIndex
from gateway.catalogue.search_text import split_words
from gateway.catalogue.semantic import Semantic
from gateway.catalogue.views import TenantView
from gateway.config import TenantConfig

MEANINGS = {"boss": "manager", "superior": "manager"}
"""What the stand-in knows that BM25 cannot: words that mean another."""


class Encoder:
    """Unit bag-of-words vectors, words hashed into 256 dimensions, with MEANINGS applied."""

    def __init__(self) -> None:
        self.passages = 0

    def query(self, texts: str) -> np.ndarray:
        return self._vector(texts)

    def passage(self, texts: list[str]) -> np.ndarray:
        self.passages += len(texts)
        return np.stack([self._vector(text) for text in texts])

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(256, dtype=np.float32)
        for word in split_words(text):
            vector[zlib.crc32(MEANINGS.get(word, word).encode()) % 256] += 1
        norm = np.linalg.norm(vector)
        return vector / norm if norm else vector


def test_texts_are_embedded_once_in_the_background_and_ranked_by_similarity() -> None:
    encoder = Encoder()
    semantic = Semantic(encoder)
    semantic.add(["get my manager", "send a mail", "get my manager"])
    assert semantic.wait(10)
    assert encoder.passages == 2
    assert semantic.rank("who is my boss", {1: "send a mail", 2: "get my manager", 3: "not embedded"}, 5) == [2, 1]
    semantic.retain({"send a mail"})
    assert semantic.rank("who is my boss", {1: "send a mail", 2: "get my manager"}, 5) == [1]


def test_fused_ranking_finds_by_meaning_what_bm25_misses() -> None:
    cat = catalogue()
    lexical = SearchIndex()
    lexical.sync(cat)
    semantic = Semantic(Encoder())
    fused = SearchIndex(semantic)
    fused.sync(cat)
    assert semantic.wait(60)
    query = "boss"  # in no tool's text: BM25 finds nothing
    assert lexical.search(query, cat.by_name, 5) == []
    assert "ms365__get-my-manager" in [hit.entry.exposed for hit in fused.search(query, cat.by_name, 5)]
    hits = fused.search("approve a merge request", cat.by_name, 5)  # and what BM25 finds stays found
    assert "gitlab__approve_merge_request" in [hit.entry.exposed for hit in hits]
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)


def test_the_semantic_ranking_never_finds_a_tool_the_view_hides() -> None:
    cat = catalogue()
    semantic = Semantic(Encoder())
    index = SearchIndex(semantic)
    index.sync(cat)
    assert semantic.wait(60)
    view = TenantView(cat, TenantConfig(name="t", backends=("gitlab",)), page_size=100)
    found = index.search("who is my boss, send him a mail", view.by_name, 20)
    assert found and all(view.lookup(hit.entry.exposed) is hit.entry for hit in found)
