"""Invisible and direction-changing Unicode in what the model reads: found, named and removed. Pure.

A human reviewing a tool never sees these characters, and a model reads them: tag characters
(U+E0000-U+E007F) spell hidden ASCII, bidi controls reorder what is shown, zero-width characters
and variation selectors hide data between visible ones. The check covers every `title` and
`description` string at any depth of an item (its inputSchema's property descriptions and a
prompt's argument descriptions too). An emoji sequence joined with U+200D or ending in U+FE0F
loses those characters: that costs its look, not its meaning.
"""

from __future__ import annotations

import re
from typing import Any

HIDDEN = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)
"""Soft hyphen, joiners and zero-width spaces, bidi marks, embeddings, overrides and isolates, invisible
operators, Hangul fillers, variation selectors, the BOM, interlinear annotation marks, tag characters."""
TEXT_KEYS = frozenset({"title", "description"})


def hidden_in(item: Any) -> list[str]:
    """The hidden code points in the item's titles and descriptions, as `U+E0041`, sorted, each once."""
    found: set[str] = set()
    for text in _texts(item):
        found.update(HIDDEN.findall(text))
    return [f"U+{ord(char):04X}" for char in sorted(found)]


def cleaned(item: Any) -> Any:
    """The item with the hidden characters removed from its titles and descriptions."""
    if isinstance(item, dict):
        return {k: HIDDEN.sub("", v) if k in TEXT_KEYS and isinstance(v, str) else cleaned(v)
                for k, v in item.items()}
    if isinstance(item, list):
        return [cleaned(v) for v in item]
    return item


def _texts(item: Any) -> list[str]:
    texts: list[str] = []
    stack = [item]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            texts.extend(v for k, v in node.items() if k in TEXT_KEYS and isinstance(v, str))
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend(node)
    return texts
