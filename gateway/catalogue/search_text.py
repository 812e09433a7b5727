"""The words of a tool and of a query, as the search index reads them. Pure.

A tool's words come in fields that weigh differently (gateway.catalogue.search): its name split
into words (`create_merge_request`, `listIssues`), its title, its description, its arguments' names
and descriptions, and its server (namespace). A query's words are the user's, split the same way,
without filler words, each with the few words that mean the same in tool descriptions (`remove` for
`delete`, `repository` for `repo`): a tool does not have to use the user's verb to be found.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
"""Words in a name or sentence: `listIssues` -> list, Issues; `HTTPServer` -> HTTP, Server; snake_case by its `_`."""
MAX_FIELD_CHARS = 4000
"""A description longer than this is cut (a few tools carry whole manuals)."""
SENTENCE_CHARS = 400
"""Characters of a description the semantic ranking reads: embedding cost grows with length."""
MAX_QUERY_WORDS = 32
"""Words of a query that count; a longer query is cut."""
NESTED_DEPTH = 2
"""Arguments' own properties are read this deep (an `options` object's fields are arguments too)."""

STOPWORDS = frozenset({
    "a", "an", "the", "and", "or", "but", "if", "of", "to", "in", "on", "at", "by", "for", "with", "from", "into",
    "onto", "about", "as", "is", "are", "was", "were", "be", "been", "being", "i", "me", "my", "we", "our", "you",
    "your", "it", "its", "this", "that", "these", "those", "there", "here", "what", "which", "who", "whom",
    "whose", "how", "when", "where", "why", "do", "does", "did", "done", "can", "could", "would", "should",
    "will", "shall", "may", "might", "must", "please", "want", "need", "like", "let", "lets", "just", "also",
    "some", "any", "each", "every", "other", "another", "such", "very", "so", "than", "then", "too", "via",
    "using", "used", "up", "out", "over",
})
"""Filler words that no tool is found by (`new`, `all` and `use` are kept: tools are named by them)."""

SYNONYMS: Mapping[str, tuple[str, ...]] = {
    "add": ("create", "insert", "append"),
    "browse": ("navigate", "open"),
    "change": ("update", "modify", "edit", "set"),
    "chat": ("message", "channel", "conversation"),
    "comment": ("note", "reply"),
    "create": ("add", "new", "make", "open"),
    "delete": ("remove", "erase", "destroy", "drop", "trash"),
    "directory": ("folder", "dir"),
    "dir": ("directory", "folder"),
    "doc": ("document", "documentation", "page"),
    "docs": ("documentation", "document", "page"),
    "edit": ("update", "modify", "change", "write"),
    "email": ("mail", "message", "inbox"),
    "erase": ("delete", "remove"),
    "fetch": ("get", "download", "retrieve", "read"),
    "file": ("document", "path"),
    "find": ("search", "query", "lookup", "list"),
    "folder": ("directory", "dir"),
    "get": ("fetch", "retrieve", "read", "show"),
    "issue": ("ticket", "bug", "task"),
    "k8s": ("kubernetes",),
    "list": ("show", "get", "enumerate", "search"),
    "look": ("search", "find"),
    "mail": ("email", "message"),
    "make": ("create", "new"),
    "meeting": ("event", "calendar"),
    "mr": ("merge", "request"),
    "note": ("comment", "memo", "page"),
    "pr": ("pull", "request"),
    "remove": ("delete", "erase"),
    "rename": ("move",),
    "repo": ("repository", "project"),
    "repository": ("repo", "project"),
    "retrieve": ("get", "fetch", "read"),
    "run": ("execute", "start", "trigger"),
    "save": ("write", "store", "create"),
    "schedule": ("calendar", "event"),
    "search": ("find", "query", "lookup"),
    "send": ("post", "create", "reply"),
    "show": ("get", "list", "view", "display"),
    "start": ("run", "execute", "trigger", "launch"),
    "ticket": ("issue", "task", "bug"),
    "update": ("edit", "modify", "change", "patch"),
    "upload": ("put", "create", "write"),
    "view": ("get", "show", "read"),
    "write": ("create", "save", "update"),
}
"""Words that mean the same in tool descriptions. General-purpose, not tuned per query: each maps an
everyday word to the verbs and nouns APIs use for it."""


@dataclass(frozen=True, slots=True)
class ToolText:
    """The words of one tool, by field (the index's columns, in order)."""

    name: str
    title: str
    description: str
    arguments: str
    server: str

    def columns(self) -> tuple[str, str, str, str, str]:
        return self.name, self.title, self.description, self.arguments, self.server

    def sentence(self) -> str:
        """What a sentence-embedding model reads (semantic.py): the name's words, the title and the
        description's start, where what a tool does is said; its arguments would mostly add noise."""
        return f"{self.name}. {self.title}. {self.description[:SENTENCE_CHARS]}"


def split_words(text: str) -> list[str]:
    """Lower-case words of `text`, names split at case changes, underscores, dots and dashes."""
    return [word.lower() for word in WORD.findall(text)]


def tool_text(tool: Mapping[str, Any], namespace: str, original: str) -> ToolText:
    """What the index reads of a tool (its exposed JSON, decoded) offered by the backend of `namespace`."""
    title = _string(tool.get("title"))
    annotations = tool.get("annotations")
    if isinstance(annotations, dict) and _string(annotations.get("title")) not in ("", title):
        title = f"{title} {_string(annotations.get('title'))}"
    name = " ".join(split_words(original))
    return ToolText(name=name, title=" ".join(split_words(title)),
                    description=_string(tool.get("description"))[:MAX_FIELD_CHARS],
                    arguments=" ".join(_arguments(tool.get("inputSchema"), NESTED_DEPTH))[:MAX_FIELD_CHARS],
                    server=" ".join(split_words(namespace)))


def query_groups(query: str) -> list[tuple[str, ...]]:
    """The query's words without filler, each with its synonyms: `[("delete", "remove", ...), ("repo", ...)]`."""
    words = [w for w in split_words(query) if w not in STOPWORDS][:MAX_QUERY_WORDS]
    groups: list[tuple[str, ...]] = []
    for word in dict.fromkeys(words):  # once each, in order
        groups.append((word, *SYNONYMS.get(word, ())))
    return groups


def _arguments(schema: Any, depth: int) -> Iterator[str]:
    """Each property's name (split) and description, and its enum values, `depth` levels down."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or depth <= 0:
        return
    for name, spec in properties.items():
        yield " ".join(split_words(str(name)))
        if not isinstance(spec, dict):
            continue
        yield _string(spec.get("description"))[:500]
        enum = spec.get("enum")
        if isinstance(enum, list):
            yield " ".join(str(value) for value in enum[:20] if isinstance(value, str))
        yield from _arguments(spec, depth - 1)
        items = spec.get("items")
        if isinstance(items, dict):
            yield from _arguments(items, depth - 1)


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""
