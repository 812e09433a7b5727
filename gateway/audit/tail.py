"""Reading the Redis trail: a time window, filters, and a line per record for a terminal.

Stream entry ids start with the millisecond Redis added them, so `--since` is a range from that id.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from gateway.audit.redis_sink import RECORD_FIELD

PAGE = 1000
FOLLOW_BLOCK_MS = 400
"""Under the store client's socket timeout (store.client): an empty wait ends as a reply, not an error."""
_SPAN = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def since_ms(text: str, now: float | None = None) -> int:
    """`10m`, `2h`, `1d`, `30s` ago, or an ISO 8601 time, as Unix milliseconds; ValueError when neither."""
    span = _SPAN.match(text.strip())
    if span:
        return int(((now if now is not None else time.time()) - float(span[1]) * _UNIT_SECONDS[span[2]]) * 1000)
    try:
        return int(datetime.fromisoformat(text.strip().replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        raise ValueError("--since must be a span like 30s, 10m, 2h or 1d, or an ISO 8601 time") from None


@dataclass(frozen=True, slots=True)
class Filter:
    tenant: str | None = None
    subject: str | None = None

    def keeps(self, record: dict[str, Any]) -> bool:
        return ((self.tenant is None or record.get("tenant") == self.tenant)
                and (self.subject is None or record.get("subject") == self.subject))


async def entries(redis: Any, key: str, start: str = "-") -> AsyncIterator[tuple[str, bytes]]:
    """Every entry from `start` on, in pages: (entry id, the record's JSON line)."""
    while True:
        page = await redis.xrange(key, min=start, max="+", count=PAGE)
        for entry_id, fields in page:
            yield _text(entry_id), fields.get(RECORD_FIELD.encode(), b"")
        if len(page) < PAGE:
            return
        start = "(" + _text(page[-1][0])


async def latest(redis: Any, key: str, count: int) -> list[tuple[str, bytes]]:
    """The last `count` entries, oldest first."""
    page = await redis.xrevrange(key, max="+", min="-", count=count)
    return [(_text(entry_id), fields.get(RECORD_FIELD.encode(), b"")) for entry_id, fields in reversed(page)]


async def follow(redis: Any, key: str, after: str) -> AsyncIterator[tuple[str, bytes]]:
    """Entries as they are added after `after`, until cancelled."""
    while True:
        found = await redis.xread({key: after}, block=FOLLOW_BLOCK_MS, count=PAGE)
        for _stream, page in found or ():
            for entry_id, fields in page:
                after = _text(entry_id)
                yield after, fields.get(RECORD_FIELD.encode(), b"")


def terminal_line(record: dict[str, Any]) -> str:
    """One record for a person: when, who, what, on what, how it ended."""
    who = f"{record.get('tenant') or '-'}/{record.get('subject') or '-'}"
    what = record.get("name") or ""
    backend = record.get("backend")
    at = f" [{backend} {record.get('original') or ''}".rstrip() + "]" if backend else ""
    took = f" {record['duration_ms']}ms" if record.get("duration_ms") is not None else ""
    return f"{record.get('time')} {who} {record.get('method')} {what}{at} -> {record.get('outcome')}{took}"


def parsed(line: bytes) -> dict[str, Any] | None:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
