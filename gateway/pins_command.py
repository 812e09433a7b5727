"""`mcp-gateway pins diff|approve|reject|export`: review tool pinning from a shell.

diff, approve and reject work on the shared store (`store.redis_url`) directly, so no gateway needs
to be running and every replica hears of an approval at once. `export` writes the approvals as a
lockfile (`integrity.lockfile`, or `--output`, or stdout): from the shared store, or, without one,
from what the backends list now (a first lockfile to review and commit).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from gateway.config import Config

WithCatalogue = Callable[[Config, Callable[[Any], Any]], Awaitable[Any]]
NEEDS_REDIS = ("pins {command} works on the shared store: set store.redis_url (with the in-process store, "
               "use the admin endpoints: POST /admin/pins/approve)")


def add_pins_parser(commands: Any, with_catalogue: WithCatalogue) -> None:
    pins = commands.add_parser("pins", help="review tool pinning (held items, approvals, the lockfile)",
                               description="review tool pinning (held items, approvals, the lockfile)")
    sub = pins.add_subparsers(required=True, metavar="SUBCOMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, help=help_text, description=help_text)
        parser.add_argument("--config", metavar="PATH", help="config file (default: the bundled demo config)")
        parser.set_defaults(run=lambda config, args: _run(config, args, with_catalogue), preflight=False,
                            pins=name)
        return parser

    diff = command("diff", "show each item held for review and how it differs from the approved definition")
    diff.add_argument("--backend", help="only this backend")
    diff.add_argument("--json", action="store_true", help="print JSON")
    for name, help_text in (("approve", "approve held items of one backend: every replica serves them"),
                            ("reject", "reject held items of one backend: they stay held, marked rejected")):
        decide = command(name, help_text)
        decide.add_argument("--backend", required=True, help="the backend")
        decide.add_argument("items", nargs="*", metavar="ITEM",
                            help="KIND/NAME, e.g. tools/create_issue (a bare name is a tool); none: every held item")
        decide.add_argument("--fingerprint", help="refuse unless the held definition has this fingerprint")
    export = command("export", "write the approvals as a lockfile")
    export.add_argument("--output", metavar="PATH", help="default: integrity.lockfile, else stdout")


def _run(config: Config, args: argparse.Namespace, with_catalogue: WithCatalogue) -> int:
    from gateway.catalogue.lockfile import LockfileError
    from gateway.catalogue.reviews import ReviewError
    from gateway.config import LoggingConfig
    from gateway.logs import configure_logging
    from gateway.store.health import StoreUnavailable

    configure_logging(LoggingConfig(level="info", format="auto"), stream=sys.stderr)  # stdout is the answer

    if args.pins != "export" and not config.store.redis_url:
        print(f"error: {NEEDS_REDIS.format(command=args.pins)}", file=sys.stderr)
        return 1
    if getattr(args, "backend", None) and config.backend(args.backend) is None:
        print(f"error: unknown backend {args.backend!r}", file=sys.stderr)
        return 1
    try:
        return asyncio.run(_COMMANDS[args.pins](config, args, with_catalogue))
    except (ReviewError, LockfileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
    except StoreUnavailable:
        print("error: the shared store (store.redis_url) does not answer", file=sys.stderr)
    except OSError as exc:
        print(f"error: cannot write the lockfile ({exc.strerror})", file=sys.stderr)
    return 1


@asynccontextmanager
async def _store(config: Config) -> AsyncIterator[Any]:
    from gateway.catalogue.pinstore import RedisPinStore
    from gateway.shared_state import close_client
    from gateway.store.client import create_client
    from gateway.store.events import EventBus
    from gateway.store.health import StoreHealth, StoreUnavailable, redacted

    url, prefix = config.store.redis_url or "", config.store.key_prefix
    redis = create_client(url)
    try:
        health = StoreHealth(name=redacted(url))
        if not await health.probe(redis.ping):
            raise StoreUnavailable("redis is down")
        events = EventBus(redis, channel=f"{prefix}events", health=health)
        yield RedisPinStore(redis, key_prefix=prefix, health=health, events=events)
    finally:
        await close_client(redis)


async def _diff(config: Config, args: argparse.Namespace, _: WithCatalogue) -> int:
    from gateway.catalogue.lockfile import read_lockfile
    from gateway.catalogue.reviews import held_report

    lockfile = read_lockfile(config.integrity.lockfile)
    names = [args.backend] if args.backend else [b.name for b in config.backends]
    async with _store(config) as store:
        report = [item for name in names for item in await held_report(store, name, lockfile.get(name, {}))]
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for item in report:
        print(f"# {item['backend']} {item['item']}: {item['reason']}{' (rejected)' if item['rejected'] else ''}, "
              f"fingerprint {item['fingerprint']}")
        print("\n".join(item["diff"]) or "(no difference in the definition: held for hidden characters)")
    if not report:
        print("nothing is held for review", file=sys.stderr)
    return 0


async def _decide(config: Config, args: argparse.Namespace, _: WithCatalogue) -> int:
    from gateway.catalogue.reviews import approve, chosen_items, reject

    decide = approve if args.pins == "approve" else reject
    async with _store(config) as store:
        done = await decide(store, args.backend, chosen_items(args.items), by=f"cli:{getpass.getuser()}",
                            fingerprint=args.fingerprint)
    print(f"{'approved' if decide is approve else 'rejected'}: {', '.join(done)}")
    return 0


async def _export(config: Config, args: argparse.Namespace, with_catalogue: WithCatalogue) -> int:
    from gateway.catalogue.lockfile import lockfile_bytes, read_lockfile, write_lockfile

    lockfile = read_lockfile(config.integrity.lockfile)
    if config.store.redis_url:
        async with _store(config) as store:
            approved = {b.name: {**lockfile.get(b.name, {}), **await store.approved(b.name)}
                        for b in config.backends}
    else:
        approved = await with_catalogue(config, _listed)
    path = args.output or config.integrity.lockfile
    if path is None:
        sys.stdout.buffer.write(lockfile_bytes(approved))
        return 0
    write_lockfile(path, approved)
    print(f"wrote {path}: {sum(map(len, approved.values()))} approved items", file=sys.stderr)
    return 0


async def _listed(service: Any) -> dict[str, Any]:
    """What every backend lists now, as approvals (the service just listed each backend once)."""
    from gateway.catalogue.fingerprints import definitions
    from gateway.catalogue.pins import Reading
    from gateway.catalogue.pinstore import Pin

    approved = {}
    for name, snapshot in service.current.snapshots.items():
        found = definitions(snapshot)
        prints = Reading.of(snapshot, found).prints
        approved[name] = {key: Pin(prints[key], item, 0.0, "export") for key, item in found.items()}
    return approved


_COMMANDS = {"diff": _diff, "approve": _decide, "reject": _decide, "export": _export}
