"""Clock backend: current time and time-zone conversion (IANA zones via ``zoneinfo``).

``now`` and ``convert`` return a TypedDict, so they publish an ``outputSchema`` and their
results carry ``structured_content`` as well as text. It also offers a prompt to plan a
meeting across zones, the resource ``clock://zones`` (every zone name) and completions of
zone names.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import TypedDict
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

import mcp_types as types
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from . import runner

#: Upper bound on ``list_timezones`` results, so one call can't return ~600 names.
MAX_ZONES = 50

server = MCPServer("clock", version="1.0.0", log_level="WARNING")


class ZonedTime(TypedDict):
    """A moment in one time zone."""

    timezone: str
    iso: str
    utc_offset: str


class ZoneList(TypedDict):
    """One bounded page of zone names."""

    zones: list[str]
    total: int
    truncated: bool


@cache
def _all_zones() -> tuple[str, ...]:
    """Sorted zone names; cached because scanning tzdata is slow."""
    return tuple(sorted(available_timezones()))


def _zone(name: str) -> ZoneInfo:
    """Resolve an IANA zone name, turning a bad one into a tool error."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ToolError(f"Unknown time zone: {name!r}") from exc


def _zoned(moment: datetime, zone_name: str) -> ZonedTime:
    local = moment.astimezone(_zone(zone_name))
    return ZonedTime(timezone=zone_name, iso=local.isoformat(), utc_offset=local.strftime("%z"))


@server.tool()
def now(timezone: str = "UTC") -> ZonedTime:
    """Current time in an IANA time zone (e.g. "Europe/Paris"), as ISO 8601."""
    return _zoned(datetime.now(UTC), timezone)


@server.tool()
def convert(time: str, from_zone: str, to_zone: str) -> ZonedTime:
    """Convert an ISO 8601 time from one zone to another.

    A ``time`` with its own offset keeps it; a naive one is read in ``from_zone``.
    """
    try:
        parsed = datetime.fromisoformat(time)
    except ValueError as exc:
        raise ToolError(f"Not an ISO 8601 time: {time!r}") from exc
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=_zone(from_zone))
    else:
        _zone(from_zone)  # still reject an unknown source zone
    return _zoned(parsed, to_zone)


@server.tool()
def list_timezones(prefix: str = "") -> ZoneList:
    """IANA zone names starting with ``prefix`` (case-insensitive), at most 50."""
    wanted = prefix.lower()
    matches = [zone for zone in _all_zones() if zone.lower().startswith(wanted)]
    truncated = len(matches) > MAX_ZONES
    return ZoneList(zones=matches[:MAX_ZONES], total=len(matches), truncated=truncated)


@server.prompt()
def plan_meeting(zones: str, duration_minutes: str = "30") -> str:
    """Find a meeting time that suits every one of ``zones`` (comma-separated IANA names)."""
    return (f"Propose three {duration_minutes}-minute meeting slots within working hours (09:00-17:00) "
            f"in every one of these time zones: {zones}. Use the clock tools to check.")


@server.resource("clock://zones", name="zones", mime_type="text/plain")
def zones() -> str:
    """Every IANA zone name, one per line."""
    return "\n".join(_all_zones())


@server.completion()
async def complete(ref: types.PromptReference | types.ResourceTemplateReference, argument: types.CompletionArgument,
                   context: types.CompletionContext | None) -> types.Completion | None:
    """Zone names starting with what was typed (the last of a comma-separated list)."""
    if argument.name != "zones":
        return None
    typed = argument.value.rsplit(",", 1)[-1].strip().lower()
    matches = [zone for zone in _all_zones() if zone.lower().startswith(typed)]
    return types.Completion(values=matches[:MAX_ZONES], total=len(matches), has_more=len(matches) > MAX_ZONES)


def main() -> None:
    """Command-line entry point."""
    runner.main(server, description="Clock MCP backend")


if __name__ == "__main__":
    main()
