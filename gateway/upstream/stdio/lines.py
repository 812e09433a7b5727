"""Reading a stdio backend's stdout line by line, without ever buffering an over-long line whole.

A line over the reader's limit is dropped; its head is kept so that the request it answered
(its leading `id`) can fail at once instead of waiting for its deadline.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

HEAD_BYTES = 4096
"""How much of an over-long line is kept to find out whose response it was."""
_LEADING_SCALARS = re.compile(
    rb'\s*\{((?:\s*"[^"\\]*"\s*:\s*(?:"[^"\\]*"|-?\d+|true|false|null)\s*,)*)'
)
"""The top-level members before the first object or array (where `id` usually sits)."""
_ID_MEMBER = re.compile(rb'"id"\s*:\s*(-?\d+)\s*,')


async def next_line(stdout: asyncio.StreamReader, on_too_long: Callable[[bytes], None]) -> bytes | None:
    """The next line, None at EOF. An over-long line goes to `on_too_long` (its head) and is skipped."""
    while True:
        try:
            return await stdout.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:  # EOF; an unterminated last line still counts
            return exc.partial or None
        except asyncio.LimitOverrunError as exc:
            head = await stdout.readexactly(exc.consumed)  # already buffered: no wait
            on_too_long(head[:HEAD_BYTES])
            if not await _discard_rest_of_line(stdout):
                return None


def leading_id(head: bytes) -> int | None:
    """The integer `id` among a JSON object's leading scalar members, if it is there.

    Only members before the first nested value are read, so an `id` inside `result`
    can never be mistaken for the envelope's.
    """
    members = _LEADING_SCALARS.match(head)
    found = _ID_MEMBER.search(members.group(1)) if members else None
    return int(found.group(1)) if found else None


async def _discard_rest_of_line(stdout: asyncio.StreamReader) -> bool:
    """Consume up to and including the next newline, a buffer at a time; False at EOF."""
    while True:
        try:
            await stdout.readuntil(b"\n")
            return True
        except asyncio.IncompleteReadError:
            return False
        except asyncio.LimitOverrunError as exc:
            await stdout.readexactly(exc.consumed)
