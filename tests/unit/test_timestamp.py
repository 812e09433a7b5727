"""The log timestamp: structlog's ISO UTC format, formatted once a second."""

from __future__ import annotations

import datetime
import re
import time

import structlog

from gateway.logs import UtcTimestamp

ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")


def test_it_has_structlogs_iso_utc_shape_and_the_current_time() -> None:
    ours = UtcTimestamp()(None, "info", {})["timestamp"]
    theirs = structlog.processors.TimeStamper(fmt="iso", utc=True)(None, "info", {})["timestamp"]
    assert ISO_UTC.match(ours) and ISO_UTC.match(theirs)
    parsed = datetime.datetime.fromisoformat(ours.replace("Z", "+00:00"))
    assert abs(parsed.timestamp() - time.time()) < 1.0


def test_lines_in_a_row_keep_time_order_across_second_boundaries() -> None:
    stamp = UtcTimestamp()
    seen = []
    deadline = time.monotonic() + 1.2  # crosses at least one second boundary
    while time.monotonic() < deadline:
        seen.append(stamp(None, "info", {})["timestamp"])
        time.sleep(0.01)
    assert seen == sorted(seen)
    assert len({s[:19] for s in seen}) >= 2
