"""`mcp-gateway audit verify` and `mcp-gateway audit tail`: the trail read back, from files or Redis.

Errors are one line on stderr and exit status 1 (2 for bad options); never a traceback, never the
HMAC key or the Redis URL (which may hold a password).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from gateway.audit import tail
from gateway.audit.redis_sink import stream_key
from gateway.audit.verify import Report, file_lines, verify
from gateway.config import Config


def add_commands(commands: Any) -> None:
    """`audit verify` and `audit tail` under the `mcp-gateway` parser's subcommands."""
    audit = commands.add_parser("audit", help="check and read the audit trail",
                                description="check and read the audit trail")
    sub = audit.add_subparsers(required=True, metavar="SUBCOMMAND")
    check = sub.add_parser("verify", help="prove a trail unbroken, or name its first changed, removed or reordered "
                           "record", description="prove a trail unbroken (exit 0), or name its first changed, "
                           "removed or reordered record (exit 1); the key is the config's audit.hmac_key")
    check.add_argument("files", nargs="*", metavar="FILE", help="JSON-lines trail files, oldest first")
    check.add_argument("--redis", action="store_true",
                       help="the Redis stream (audit.redis_url, else store.redis_url), not files")
    check.set_defaults(run=run_verify)
    show = sub.add_parser("tail", help="print the Redis trail", description="print the Redis trail (the last "
                          "records, or those since a time), filtered, for a terminal or as JSON lines")
    show.add_argument("--tenant", help="only this tenant's records")
    show.add_argument("--subject", help="only this subject's records")
    show.add_argument("--since", help="from this long ago (30s, 10m, 2h, 1d) or this ISO 8601 time")
    show.add_argument("--last", type=int, default=100, help="without --since, this many of the latest records")
    show.add_argument("--follow", action="store_true", help="keep printing records as they come")
    show.add_argument("--json", action="store_true", help="print each record as its JSON line")
    show.set_defaults(run=run_tail)
    for parser in (check, show):
        parser.add_argument("--config", metavar="PATH", help="config file (default: the bundled demo config)")
        parser.set_defaults(preflight=False)


def run_verify(config: Config, args: argparse.Namespace) -> int:
    if bool(args.files) == bool(args.redis):
        return _fail("give FILE... or --redis (one of them)", status=2)
    key = config.audit.hmac_key.encode() if config.audit.hmac_key else None
    if key is None:
        print("warning: audit.hmac_key is not set: only order and gaps are checked, not content", file=sys.stderr)
    try:
        report = asyncio.run(_verify_redis(config, key)) if args.redis else verify(file_lines(args.files), key)
    except OSError as exc:
        return _fail(f"cannot read {exc.filename or 'the trail'} ({exc.strerror or type(exc).__name__})")
    except _Unreachable as exc:
        return _fail(str(exc))
    return _print_report(report)


def _print_report(report: Report) -> int:
    for note in report.notes:
        print(f"note: {note}")
    if report.problem is not None:
        print(f"FAILED after {report.records} good records: {report.problem.describe()}")
        return 1
    print(f"ok: {report.records} records in {len(report.chains)} chains, each unbroken")
    return 0


async def _verify_redis(config: Config, key: bytes | None) -> Report:
    async with _redis(config) as (redis, stream):
        return verify([pair async for pair in tail.entries(redis, stream)], key)


def run_tail(config: Config, args: argparse.Namespace) -> int:
    try:
        since = tail.since_ms(args.since) if args.since else None
    except ValueError as exc:
        return _fail(str(exc), status=2)
    if args.last < 1:
        return _fail("--last must be at least 1", status=2)
    keep = tail.Filter(args.tenant, args.subject)
    try:
        asyncio.run(_tail(config, args, since, keep))
    except KeyboardInterrupt:
        return 0
    except _Unreachable as exc:
        return _fail(str(exc))
    return 0


async def _tail(config: Config, args: argparse.Namespace, since: int | None, keep: tail.Filter) -> None:
    async with _redis(config) as (redis, stream):
        last = "$"
        if since is None:
            found = await tail.latest(redis, stream, args.last)
            last = found[-1][0] if found else "$"
            _show(found, keep, args.json)
        else:
            async for entry_id, line in tail.entries(redis, stream, str(since)):
                last = entry_id
                _show([(entry_id, line)], keep, args.json)
        if args.follow:
            async for pair in tail.follow(redis, stream, last):
                _show([pair], keep, args.json)


def _show(found: Iterable[tuple[str, bytes]], keep: tail.Filter, as_json: bool) -> None:
    for _entry_id, line in found:
        record = tail.parsed(line)
        if record is None or not keep.keeps(record):
            continue
        print(line.decode() if as_json else tail.terminal_line(record), flush=True)


class _Unreachable(Exception):
    """Redis could not be asked (said without its URL)."""


@asynccontextmanager
async def _redis(config: Config) -> AsyncIterator[tuple[Any, str]]:
    """The store's Redis client and the trail's stream key; connection failures become _Unreachable."""
    url = config.audit.redis_url or config.store.redis_url
    if not url:
        raise _Unreachable("neither audit.redis_url nor store.redis_url is set: there is no Redis trail to read")
    from gateway.store.client import create_client

    client = create_client(url)
    try:
        yield client, stream_key(config.store.key_prefix, config.audit.redis_stream)
    except Exception as exc:
        if _is_connection_error(exc):
            raise _Unreachable(f"cannot reach the trail's Redis ({type(exc).__name__})") from None
        raise
    finally:
        await client.aclose()


def _is_connection_error(exc: BaseException) -> bool:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    return isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError)


def _fail(message: str, *, status: int = 1) -> int:
    print(f"error: {message}", file=sys.stderr)
    return status
