"""What every benchmark command's run shares: its time limit, its progress lines, its common options."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn


class Interrupted(KeyboardInterrupt):
    """SIGTERM or the overall time limit: unwind so every process gets stopped.

    A KeyboardInterrupt, so no `except Exception` on the way (the load generator counts
    those as failed requests) swallows it, and asyncio lets it out of the event loop.
    """


def install_limits(max_seconds: int) -> None:
    """SIGTERM, SIGINT and the alarm after `max_seconds` raise Interrupted."""
    def interrupt(signum: int, frame: Any) -> NoReturn:
        raise Interrupted(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)  # also keeps asyncio.Runner from installing its own
    signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(max_seconds)


def say(text: str) -> None:
    """A progress line, on stderr (stdout holds the results)."""
    print(text, file=sys.stderr, flush=True)


def add_run_options(parser: argparse.ArgumentParser, out: Path, max_seconds: int) -> None:
    """--out, --max-seconds and --keep-workdir."""
    parser.add_argument("--out", default=str(out), help="report directory")
    parser.add_argument("--max-seconds", type=int, default=max_seconds, help="cut the whole run off after this")
    parser.add_argument("--keep-workdir", action="store_true", help="keep configs and process logs")
