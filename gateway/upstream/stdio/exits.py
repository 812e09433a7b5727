"""How a stdio child ended, in words: its exit status and the last line it wrote to stderr.

A backend that cannot start (a missing module, a bad flag) says why on stderr just before it
exits; that line is what an operator needs in the warning, in `/admin/backends` and in the
error a call gets, instead of a bare "not running".
"""

from __future__ import annotations

import signal

TAIL_CHARS = 300
"""Enough for a traceback's last line (`ModuleNotFoundError: No module named 'mcp'`)."""
STDERR_DRAIN = 0.5
"""Seconds to let a dead child's stderr be read to its end before giving up on it."""


class ExitReport:
    """Remembers a child's last stderr line; `exited()` turns it and the status into one reason."""

    def __init__(self) -> None:
        self.last: str | None = None
        self._tail = ""

    def heard(self, line: str) -> None:
        if line.strip():
            self._tail = line.strip()[:TAIL_CHARS]

    def exited(self, status: int | None) -> str:
        """The reason for this exit; it stays in `last` until the next exit, and the tail starts afresh."""
        how = f"exited with status {status}" if status is None or status >= 0 else _signal_name(-status)
        self.last = f"{how}: {self._tail}" if self._tail else how
        self._tail = ""
        return self.last


def _signal_name(number: int) -> str:
    try:
        return f"killed by {signal.Signals(number).name}"
    except ValueError:
        return f"killed by signal {number}"
