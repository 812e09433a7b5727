"""`python -m bench.instructions`: CPU instructions per tools/call, gateway vs the stub backend.

`--op read` and `--op prompt` measure resources/read and prompts/get the same way.

Timings on a shared 2-core VM swing by 2x from one minute to the next, which hides any
change smaller than that. Instructions counted by valgrind's callgrind do not: the same
code and load give the same count to a fraction of a percent, whatever else the machine
is doing. So this is the yardstick for one change at a time (run it before and after);
the timed scenarios in `python -m bench` stay the judge of speed.

Each process is measured in its own run, under callgrind with counting switched on only
around the measured load (`callgrind_control -i on/off`): the stub answering tools/call
directly, then the gateway (in front of an unmeasured stub) answering the same calls, once
from clients with a session (2025-11-25) and once from stateless 2026-07-28 clients, each
measured part dumped on its own; then the same calls to the same stub configured a second time as a
backend the gateway speaks 2026-07-28 to (its `protocol: "2026"`). Counts are user space only:
system calls and the kernel's share are not in them.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from bench.harness import Backend, gateway_config, start_gateway, start_stub
from bench.loadgen import ClientProfile, LoadSpec, run_load
from bench.procs import Managed, ProcessSet
from bench.scenarios import echo_profile
from bench.stateless import MODERN_VERSIONS
from bench.stub_backend import PROMPT_NAME, RESOURCE_PREFIX

TOOLS = 10
CONCURRENCY = 4
WARMUP_CALLS = 300
"""Untimed calls first: connections, sessions, caches and the interpreter's specializations settle."""
STARTUP_TIMEOUT = 300.0
"""Python under valgrind starts tens of times slower than without."""
REQUIRED = ("valgrind", "callgrind_control")
METHODS = {"echo": "tools/call", "read": "resources/read", "prompt": "prompts/get"}
"""The --op choices and the method each measures."""
SESSION_VERSION = "2025-11-25"
STATELESS_VERSION = MODERN_VERSIONS[-1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="measured requests per process")
    parser.add_argument("--op", choices=[*METHODS], default="echo",
                        help="echo: tools/call (the default yardstick); read: resources/read; prompt: prompts/get")
    args = parser.parse_args(argv)
    missing = [tool for tool in REQUIRED if shutil.which(tool) is None]
    if missing:
        print(f"error: {', '.join(missing)} not found (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    if args.calls < 1:
        print("error: --calls must be at least 1", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="mcpgw-instructions-"))
    try:
        with ProcessSet(workdir) as procs:
            direct = measure_stub(procs, workdir, args.calls, args.op)
            (session, stateless), modern = measure_gateway(procs, workdir, args.calls, args.op)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"instructions per {METHODS[args.op]} ({args.calls} calls, concurrency {CONCURRENCY}; "
          f"session clients at {SESSION_VERSION}, stateless ones at {STATELESS_VERSION}; "
          f"a modern backend is the stub spoken to at {STATELESS_VERSION}):")
    print(f"  direct to the stub                {direct:>12,.0f}")
    rows = {"session": session, "stateless": stateless,
            "session; modern backend": modern[0], "stateless; modern backend": modern[1]}
    for label, count in rows.items():
        print(f"  through the gateway ({label + ')':<27} {count:>12,.0f}  ({count / direct:.2f}x the stub's)")
    return 0


def measure_stub(procs: ProcessSet, workdir: Path, calls: int, op: str = "echo") -> float:
    stub = start_stub(procs, tools=TOOLS, name="stub", wrapper=_callgrind(workdir / "stub.out"))
    backend = stub.backends[0]
    return _count(stub.managed, workdir / "stub.out", backend.url, backend, calls, op, via_gateway=False)


def measure_gateway(procs: ProcessSet, workdir: Path, calls: int,
                    op: str = "echo") -> tuple[tuple[float, float], tuple[float, float]]:
    """Per call through one gateway process: from session clients, then from stateless (2026) ones;
    first to the stub as it is found (the handshake era), then to the same stub spoken to at 2026-07-28."""
    stub = start_stub(procs, tools=TOOLS, name="stub").backends[0]
    modern = replace(stub, name="modern", protocol="2026")
    out = workdir / "gateway.out"
    gateway = start_gateway(procs, gateway_config([stub, modern]), timeout=STARTUP_TIMEOUT, wrapper=_callgrind(out))
    counts = [tuple(_count(gateway.managed, out, gateway.url, backend, calls, op, via_gateway=True, version=version)
                    for version in (SESSION_VERSION, STATELESS_VERSION)) for backend in (stub, modern)]
    return counts[0], counts[1]  # type: ignore[return-value]


def profile(op: str, backend: Backend, *, via_gateway: bool) -> ClientProfile:
    """What each client asks for: echo tools, a URI prefix to read under, or the stub's prompt."""
    if op == "read":
        return ClientProfile(None, (f"{backend.name}+{RESOURCE_PREFIX}" if via_gateway else RESOURCE_PREFIX,))
    if op == "prompt":
        return ClientProfile(None, (backend.exposed(PROMPT_NAME) if via_gateway else PROMPT_NAME,))
    return echo_profile(backend, via_gateway=via_gateway)


def _callgrind(out: Path) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]


def _count(managed: Managed, out: Path, url: str, backend: Backend, calls: int, op: str, *,
           via_gateway: bool, version: str = SESSION_VERSION) -> float:
    """Instructions the process spent per call of `calls` measured ones (every reply checked)."""
    profiles = (profile(op, backend, via_gateway=via_gateway),)
    run_load(LoadSpec(url=url, op=op, requests=WARMUP_CALLS, concurrency=CONCURRENCY, profiles=profiles,
                      timeout=120, protocol_version=version))
    earlier = _dumps(out)
    _control("-i", "on", managed)
    result = run_load(LoadSpec(url=url, op=op, requests=calls, concurrency=CONCURRENCY, profiles=profiles,
                               warmup=0, timeout=120, protocol_version=version))
    _control("-i", "off", managed)
    _control("-d", None, managed)
    if result.errors:
        raise SystemExit(f"{result.errors} wrong replies: {result.error_samples}")
    return _total(_dumps(out) - earlier, out) / result.requests


def _control(option: str, value: str | None, managed: Managed) -> None:
    argv = ["callgrind_control", option, *([value] if value else []), str(managed.pid)]
    subprocess.run(argv, check=True, capture_output=True, timeout=120)


def _dumps(out: Path) -> set[Path]:
    return set(out.parent.glob(out.name + "*"))


def _total(dumps: set[Path], out: Path) -> int:
    """The largest `totals:` of these dumps (those written for the measured part)."""
    totals = [int(line.split()[1]) for dump in dumps
              for line in dump.read_text().splitlines() if line.startswith("totals:")]
    if not totals or max(totals) == 0:
        raise SystemExit(f"callgrind counted nothing in {out}* (was instrumentation switched on?)")
    return max(totals)


if __name__ == "__main__":
    sys.exit(main())
