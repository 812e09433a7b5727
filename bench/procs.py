"""The benchmark's subprocesses (stub backends, SDK backends, gateways): start, wait, measure, stop.

Every process is started in its own session (process group), tracked in a `ProcessSet`,
and stopped when the set closes, even on error or Ctrl-C: SIGTERM to the group, then
SIGKILL to it and to every descendant still alive (a `--workers` gateway puts its workers
in groups of their own). Each process writes stdout and stderr to a log file in the run's
work directory, so a failure message can show its tail.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 8.0
POLL_SECONDS = 0.01
LOG_TAIL_CHARS = 2000
START_ATTEMPTS = 3  # a free port can be taken by someone else before the child binds it


class StartError(RuntimeError):
    """A process exited early or never became ready."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@dataclass(slots=True)
class Managed:
    name: str
    popen: subprocess.Popen[bytes]
    port: int
    log_path: Path
    started: float  # time.monotonic() just before the spawn

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
        return ""

    def fail(self, what: str) -> StartError:
        return StartError(f"{self.name} (pid {self.pid}, port {self.port}) {what}\n--- log tail ---\n{self.log_tail()}")


@dataclass
class ProcessSet:
    """Owns every process the benchmark starts; `close()` stops them all."""

    workdir: Path
    processes: list[Managed] = field(default_factory=list)

    def __enter__(self) -> ProcessSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def spawn(self, name: str, argv: Sequence[str], port: int, env: dict[str, str] | None = None,
              wrapper: Sequence[str] = ()) -> Managed:
        """`python argv...` in its own process group; `wrapper` goes before it (e.g. valgrind)."""
        log_path = self.workdir / f"{name}-{port}.log"
        with log_path.open("wb") as log:  # the child keeps its own descriptor
            started = time.monotonic()
            popen = subprocess.Popen(
                [*wrapper, sys.executable, *argv], cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            )
        managed = Managed(name, popen, port, log_path, started)
        self.processes.append(managed)
        return managed

    def stop(self, managed: Managed) -> None:
        """SIGTERM the group, wait, then SIGKILL whatever is left (descendants too)."""
        if managed in self.processes:
            self.processes.remove(managed)
        descendants = _descendants(managed.pid)
        _signal_group(managed.pid, signal.SIGTERM)
        try:
            managed.popen.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            _signal_group(managed.pid, signal.SIGKILL)
            managed.popen.wait(STOP_TIMEOUT)
        for pid in descendants:  # workers in their own groups: normally gone with their parent
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        for managed in reversed(list(self.processes)):
            with contextlib.suppress(Exception):  # stop the others even if one misbehaves
                self.stop(managed)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _descendants(pid: int) -> list[int]:
    """Every live descendant of `pid`, from /proc (children of each thread, recursively)."""
    found: list[int] = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        for children in Path(f"/proc/{parent}/task").glob("*/children"):
            with contextlib.suppress(OSError, ValueError):
                kids = [int(p) for p in children.read_text().split()]
                found.extend(kids)
                pending.extend(kids)
    return found


# ---------------------------------------------------------------- readiness and measures


def wait_port(managed: Managed, timeout: float = START_TIMEOUT) -> None:
    """Until the process accepts TCP connections on its port."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not managed.alive():
            raise managed.fail(f"exited with status {managed.popen.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((HOST, managed.port), timeout=1):
            return
        time.sleep(POLL_SECONDS)
    raise managed.fail(f"did not listen within {timeout:g}s")


def wait_ready(managed: Managed, timeout: float = START_TIMEOUT, consecutive: int = 1) -> float:
    """Until GET /readyz answers 200 `consecutive` times in a row; returns seconds since spawn.

    Each probe opens a new connection, so with `--workers` several probes in a row very
    likely reach every worker (SO_REUSEPORT spreads connections).
    """
    deadline = time.monotonic() + timeout
    url = f"http://{HOST}:{managed.port}/readyz"
    streak = 0
    while time.monotonic() < deadline:
        if not managed.alive():
            raise managed.fail(f"exited with status {managed.popen.returncode}")
        streak = streak + 1 if _get_status(url) == 200 else 0
        if streak >= consecutive:
            return time.monotonic() - managed.started
        if streak == 0:
            time.sleep(POLL_SECONDS)
    raise managed.fail(f"not ready within {timeout:g}s")


def _get_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def cpu_seconds(pid: int) -> float:
    """User and system CPU time one process has used so far (/proc/<pid>/stat), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()  # the name may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    """Resident memory of one process (VmRSS from /proc/<pid>/status), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")
