"""Full-text search over the catalogue's tools: BM25 ranking by SQLite's FTS5, kept in step with the catalogue.

Why FTS5: it ships with Python (the `sqlite3` module; SQLite is among the most maintained C libraries
there are), ranks by BM25 with a weight per column, stems English words (the `porter` tokenizer),
and answers from memory in well under a millisecond for thousands of documents, with no service to
run and no extra dependency. A process holds one index for the whole catalogue, not one per tenant:
each tool is a row, with the fields of `search_text.ToolText` as columns. A search ranks the rows
matching any of the query's words (and their synonyms) and keeps, in rank order, those the caller's
view holds: the very entry, so a tool the view hides, or another tenant's, is never found.
With the `semantic` extra installed, a ranking by meaning (semantic.py) is fused with BM25's.

On a new catalogue version only the tools that changed are indexed again: a backend's unchanged
tools are the same entry objects from one version to the next (merge.py), so they keep their rows.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.catalogue.merge import Catalogue, ToolEntry
from gateway.catalogue.search_text import query_groups, tool_text

if TYPE_CHECKING:
    from gateway.catalogue.semantic import Semantic

WEIGHTS = (10.0, 6.0, 2.0, 1.5, 3.0)
"""BM25 weight of each column: name, title, description, arguments, server."""
BM25_WEIGHTS = ", ".join(str(weight) for weight in WEIGHTS)
COVERAGE_WEIGHT = 0.6
"""A tool's score grows by this share for each further word of the query it matches."""
SYNONYM_WEIGHT = 0.5
"""A synonym's match counts this much of the word's own."""
NAME_WEIGHT = 1.5
"""A tool's score grows by up to this share as the query covers its name's words: `protect_branch`
says all it does in the words of "protect the main branch", `unprotect_branch` and
`get_protected_branch` say something else as well, and BM25 alone barely tells them apart."""
FUSED_DEPTH = 50
"""With semantic ranking, the first this many of each ranking are fused."""
RRF_K = 60
"""Reciprocal rank fusion's constant, as its authors set it (Cormack et al., 2009): a rank r counts
1 / (RRF_K + r), so neither ranking's top dominates and agreement between the two wins."""


@dataclass(frozen=True, slots=True)
class Found:
    entry: ToolEntry
    score: float


class SearchIndex:
    """The catalogue's tools in an in-memory FTS5 table (see the module docstring)."""

    def __init__(self, semantic: Semantic | None = None) -> None:
        """`semantic`: a second ranking by meaning, fused with BM25's (semantic.py); None for BM25 alone."""
        self._semantic = semantic
        self._texts: dict[int, str] = {}  # each row's sentence for the semantic ranking
        self._db = sqlite3.connect(":memory:", check_same_thread=False)  # one thread at a time: the caller's
        self._db.execute("CREATE VIRTUAL TABLE tools USING fts5(name, title, description, arguments, server,"
                         " tokenize = 'porter unicode61 remove_diacritics 2')")
        self._rows: dict[int, ToolEntry] = {}
        self._name_words: dict[int, int] = {}
        self._row_of: dict[ToolEntry, int] = {}
        self._next = 1
        self.version = ""

    def __len__(self) -> int:
        return len(self._rows)

    def sync(self, catalogue: Catalogue, namespaces: Mapping[str, str] | None = None) -> None:
        """Index `catalogue`'s tools: rows of tools gone are deleted, new or changed tools added."""
        if catalogue.version == self.version:
            return
        current = set(catalogue.entries)
        gone = [entry for entry in self._row_of if entry not in current]
        namespaces = namespaces if namespaces is not None else dict(catalogue.order)
        added = [entry for entry in catalogue.entries if entry not in self._row_of]
        # One transaction: FTS5 writes a segment per transaction, and a query reads every segment.
        with self._db:
            self._delete(gone)
            self._insert(added, namespaces)
        if len(gone) + len(added) > len(self._rows) // 4:  # much changed: merge the segments into one
            self._db.execute("INSERT INTO tools (tools) VALUES ('optimize')")
        if self._semantic is not None:
            if gone:
                self._semantic.retain(set(self._texts.values()))
            self._semantic.add(self._texts[self._row_of[entry]] for entry in added)
        self.version = catalogue.version

    def search(self, query: str, visible: Mapping[str, ToolEntry], limit: int) -> list[Found]:
        """The best `limit` tools for `query` among `visible` (a view's entries by exposed name), best first.

        With semantic ranking, BM25's and the embedding's rankings are fused (reciprocal rank fusion)."""
        if limit <= 0:
            return []
        if self._semantic is None:
            return self._lexical(query, visible, limit)
        lexical = self._lexical(query, visible, FUSED_DEPTH)
        texts = {rowid: text for rowid, text in self._texts.items()
                 if visible.get((entry := self._rows[rowid]).exposed) is entry}
        similar = self._semantic.rank(query, texts, FUSED_DEPTH) if query.strip() else []
        return _fuse(lexical, [self._rows[rowid] for rowid in similar])[:limit]

    # ---------------------------------------------------------------- inside

    def _lexical(self, query: str, visible: Mapping[str, ToolEntry], limit: int) -> list[Found]:
        """BM25 per query word (its synonyms count for less), summed, times a bonus for each further word
        a tool matches: a tool that matches `create` and `issue` ranks above one that says `issue` often.
        """
        groups = query_groups(query)
        if not groups:
            return []
        scores: dict[int, float] = {}
        covered: dict[int, int] = {}
        in_name: dict[int, int] = {}
        for group in groups:
            word, *synonyms = group
            matched = self._scores(word, 1.0, scores)
            if synonyms:
                matched |= self._scores(synonyms, SYNONYM_WEIGHT, scores)
            for rowid in matched:
                covered[rowid] = covered.get(rowid, 0) + 1
            for rowid in self._in_name(group):
                in_name[rowid] = in_name.get(rowid, 0) + 1
        ranked = [Found(entry, score * (1 + COVERAGE_WEIGHT * (covered[rowid] - 1))
                        * (1 + NAME_WEIGHT * min(1.0, in_name.get(rowid, 0) / self._name_words[rowid])))
                  for rowid, score in scores.items()
                  if visible.get((entry := self._rows[rowid]).exposed) is entry]
        return heapq.nlargest(limit, ranked, key=lambda found: found.score)

    def _scores(self, words: str | list[str], weight: float, scores: dict[int, float]) -> set[int]:
        """Add each matching row's BM25 for `words` (any of them), times `weight`; returns the rows."""
        rows = self._db.execute(f"SELECT rowid, bm25(tools, {BM25_WEIGHTS}) FROM tools WHERE tools MATCH ?",
                                (_match([words] if isinstance(words, str) else words),))
        matched = set()
        for rowid, score in rows:  # FTS5's bm25 is negative: lower is better
            scores[rowid] = scores.get(rowid, 0.0) - weight * score
            matched.add(rowid)
        return matched

    def _in_name(self, words: tuple[str, ...]) -> list[int]:
        """The rows whose name holds any of `words` (stemmed as the index stems them)."""
        rows = self._db.execute("SELECT rowid FROM tools WHERE tools MATCH ?", (f"name : ({_match(words)})",))
        return [rowid for rowid, in rows]

    def _delete(self, entries: list[ToolEntry]) -> None:
        rowids = [self._row_of.pop(entry) for entry in entries]
        for rowid in rowids:
            del self._rows[rowid], self._name_words[rowid]
            self._texts.pop(rowid, None)
        self._db.executemany("DELETE FROM tools WHERE rowid = ?", ((rowid,) for rowid in rowids))

    def _insert(self, entries: list[ToolEntry], namespaces: Mapping[str, str]) -> None:
        rows = []
        for entry in entries:
            rowid, self._next = self._next, self._next + 1
            self._rows[rowid], self._row_of[entry] = entry, rowid
            text = tool_text(entry.decoded(), namespaces.get(entry.backend, entry.backend), entry.original)
            rows.append((rowid, *text.columns()))
            self._name_words[rowid] = max(1, len(set(text.name.split())))
            if self._semantic is not None:
                self._texts[rowid] = text.sentence()
        self._db.executemany("INSERT INTO tools (rowid, name, title, description, arguments, server)"
                             " VALUES (?, ?, ?, ?, ?, ?)", rows)


def semantic_ranking() -> Semantic | None:
    """The semantic ranking if the `semantic` extra (numpy and the model) is installed, else None."""
    try:
        from gateway.catalogue.semantic import load
    except ImportError:  # no numpy
        return None
    return load()


def _fuse(lexical: list[Found], similar: list[ToolEntry]) -> list[Found]:
    """The two rankings as one by reciprocal rank fusion, best first."""
    scores: dict[ToolEntry, float] = {}
    for ranking in ([found.entry for found in lexical], similar):
        for rank, entry in enumerate(ranking, 1):
            scores[entry] = scores.get(entry, 0.0) + 1 / (RRF_K + rank)
    return sorted((Found(entry, score) for entry, score in scores.items()), key=lambda found: -found.score)


def _match(words: Iterable[str]) -> str:
    """An FTS5 query matching any of `words` (each a run of letters or digits: quoting is all it needs)."""
    return " OR ".join(f'"{word}"' for word in dict.fromkeys(words))
