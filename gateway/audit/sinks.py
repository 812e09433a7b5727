"""Where sealed records go, a batch of JSON lines at a time: a rotated file, stdout (Redis: redis_sink).

A sink's `write` raises when the batch did not get through; its worker (trail.SinkWorker) then
keeps the batch and tries again, so a sink sees each batch until one write succeeds.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

FOLLOW_SECONDS = 1.0
"""How often a file sink checks whether another process rotated its file (and how much others wrote)."""


class Sink(Protocol):
    name: str  # file | redis | stdout: the label of mcpgw_audit_dropped_total

    async def write(self, lines: list[bytes]) -> None:
        """Write the lines (records' JSON, without their newline) in order, or raise (nothing of a failed batch
        counts as written)."""

    async def close(self) -> None: ...


class FileSink:
    """Appends to a JSON-lines file, rotated by size and by age: FILE.1 is the newest old one, FILE.{keep}
    the oldest kept. Several processes may append to one file (`--workers N`): each line goes out in one
    append, and a process that finds the file rotated by another opens the new one."""

    name = "file"

    def __init__(self, path: str, *, max_bytes: int, rotate_seconds: float, keep: int,
                 clock: Callable[[], float] = time.time) -> None:
        self.path, self.max_bytes, self.rotate_seconds, self.keep = Path(path), max_bytes, rotate_seconds, keep
        self.clock = clock
        self.fd = -1
        self._open()

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)  # a trail is not for all eyes
        stat = os.fstat(self.fd)
        self.inode, self.size = stat.st_ino, stat.st_size
        self.opened = self.checked = self.clock()

    async def write(self, lines: list[bytes]) -> None:
        data = b"\n".join(lines) + b"\n"
        now = self.clock()
        if now - self.checked >= FOLLOW_SECONDS:  # a stat per write cost more than the write
            self._follow(now)
        if self.size and (self.size + len(data) > self.max_bytes
                          or 0 < self.rotate_seconds <= now - self.opened):
            self._rotate()
        view = memoryview(data)
        while view:  # a regular file takes it all, bar a full disk (which raises)
            view = view[os.write(self.fd, view):]
        self.size += len(data)

    def _follow(self, now: float) -> None:
        """Reopen when another process rotated the file away (or someone removed it); take its size then."""
        self.checked = now
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            stat = None
        if stat is None or stat.st_ino != self.inode:
            os.close(self.fd)
            self._open()
        else:
            self.size = stat.st_size  # other processes' lines count towards the limit too

    def _rotate(self) -> None:
        os.close(self.fd)
        for n in range(self.keep - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{n + 1}"))
        self.path.replace(self.path.with_name(f"{self.path.name}.1"))
        self._open()

    async def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class StdoutSink:
    """One JSON line per record on stdout, among the log lines (containers collect both)."""

    name = "stdout"

    async def write(self, lines: list[bytes]) -> None:
        sys.stdout.flush()  # the log's own lines first: whole lines never interleave
        sys.stdout.buffer.write(b"\n".join(lines) + b"\n")
        sys.stdout.buffer.flush()

    async def close(self) -> None:
        return None
