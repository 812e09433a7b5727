"""`python -m bench.instructions`: CPU instructions per tools/call, gateway vs the stub backend.

`--op read` and `--op prompt` measure resources/read and prompts/get the same way, `--op list` a full
tools/list. `--rules N` serves the calls through a tenant with N policy rules that match none of
them (half name other callers, half other tools) and, last, one rule that allows the called tools
with a schema overlay on their arguments: what per-caller policy costs the hot path.

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
backend the gateway speaks 2026-07-28 to (its `protocol: "2026"`; the first is pinned to `handshake`).
Counts are user space only: system calls and the kernel's share are not in them.
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
from typing import Any

from bench.harness import ANONYMOUS_TENANT, Backend, gateway_config, start_gateway, start_stub
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
AUDIT_MODES = ("plain", "chained")
METHODS = {"echo": "tools/call", "read": "resources/read", "prompt": "prompts/get", "list": "tools/list"}
"""The --op choices and the method each measures."""
SESSION_VERSION = "2025-11-25"
STATELESS_VERSION = MODERN_VERSIONS[-1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="measured requests per process")
    parser.add_argument("--op", choices=[*METHODS], default="echo",
                        help="echo: tools/call (the default yardstick); read: resources/read; prompt: prompts/get; "
                             "list: a full tools/list")
    parser.add_argument("--rules", type=int, default=0,
                        help="policy rules matching none of the calls, plus one overlay rule on the called tools")
    parser.add_argument("--audit", choices=AUDIT_MODES,
                        help="the gateway audits every call to a file, arguments as their digest: plain, or "
                             "chained (each record's HMAC)")
    args = parser.parse_args(argv)
    missing = [tool for tool in REQUIRED if shutil.which(tool) is None]
    if missing:
        print(f"error: {', '.join(missing)} not found (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    if args.calls < 1 or args.rules < 0:
        print("error: --calls must be at least 1, --rules at least 0", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="mcpgw-instructions-"))
    try:
        with ProcessSet(workdir) as procs:
            direct = measure_stub(procs, workdir, args.calls, args.op)
            (session, stateless), modern = measure_gateway(procs, workdir, args.calls, args.op, args.rules,
                                                           audit=args.audit)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"instructions per {METHODS[args.op]} ({args.calls} calls, concurrency {CONCURRENCY}; "
          f"session clients at {SESSION_VERSION}, stateless ones at {STATELESS_VERSION}; "
          f"a modern backend is the stub spoken to at {STATELESS_VERSION}"
          f"{f'; a tenant with {args.rules} + 1 policy rules' if args.rules else ''}"
          f"{f'; audited to a file ({args.audit})' if args.audit else ''}):")
    print(f"  direct to the stub                {direct:>12,.0f}")
    rows = {"session": session, "stateless": stateless,
            "session; modern backend": modern[0], "stateless; modern backend": modern[1]}
    for label, count in rows.items():
        print(f"  through the gateway ({label + ')':<27} {count:>12,.0f}  ({count / direct:.2f}x the stub's)")
    return 0


def measure_stub(procs: ProcessSet, workdir: Path, calls: int, op: str = "echo") -> float:
    stub = start_stub(procs, tools=TOOLS, name="stub", wrapper=callgrind_wrapper(workdir / "stub.out"))
    backend = stub.backends[0]
    return count_per_call(stub.managed, workdir / "stub.out", backend.url, backend, calls, op, via_gateway=False)


def measure_gateway(procs: ProcessSet, workdir: Path, calls: int, op: str = "echo", rules: int = 0, *,
                    audit: str | None = None) -> tuple[tuple[float, float], tuple[float, float]]:
    """Per call through one gateway process: from session clients, then from stateless (2026) ones;
    first to the stub spoken to in the handshake era, then to the same stub spoken to at 2026-07-28."""
    # The stub serves both eras: pinned, each row keeps its path (a 2026 client bridged into a session, or
    # not); left to `auto`, a dual-era backend would meet each client in its own era.
    stub = replace(start_stub(procs, tools=TOOLS, name="stub").backends[0], protocol="handshake")
    modern = replace(stub, name="modern", protocol="2026")
    out = workdir / "gateway.out"
    tenants = {ANONYMOUS_TENANT: {"backends": ["*"], "rules": policy_rules(rules, [stub, modern])}} if rules else None
    raw = gateway_config([stub, modern], tenants=tenants)
    if audit:  # the yardstick: a file sink, arguments as their digest only
        raw["audit"] = {"enabled": True, "file": str(workdir / "audit.jsonl"),
                        "hmac_key": "bench-" + "k" * 32 if audit == "chained" else None}
    gateway = start_gateway(procs, raw, timeout=STARTUP_TIMEOUT, wrapper=callgrind_wrapper(out))
    listing = frozenset(b.exposed(t) for b in (stub, modern) for t in b.tools)
    counts = [tuple(count_per_call(gateway.managed, out, gateway.url, backend, calls, op, via_gateway=True,
                                   version=version, listing=listing)
                    for version in (SESSION_VERSION, STATELESS_VERSION)) for backend in (stub, modern)]
    return counts[0], counts[1]  # type: ignore[return-value]


def policy_rules(count: int, backends: Sequence[Backend]) -> list[dict[str, Any]]:
    """`count` rules that match none of the bench's calls, then one that allows them with an overlay.

    The bench's anonymous caller is in no group, and no backend has tools named `other…`; the
    overlay (on `n`, which the calls send as a counter from 0) holds for every call.
    """
    unmatched = [{"name": f"unmatched-{i}", "effect": "deny" if i % 3 else "allow",
                  **({"callers": {"groups": [f"team-{i}"]}} if i % 2 else {"tools": [f"other{i}__*"]})}
                 for i in range(count)]
    overlay = {"name": "counted", "effect": "allow", "tools": [b.exposed("*") for b in backends],
               "arguments": {"n": {"minimum": 0}}}
    return [*unmatched, overlay]


def profile(op: str, backend: Backend, *, via_gateway: bool) -> ClientProfile:
    """What each client asks for: echo tools, a URI prefix to read under, or the stub's prompt."""
    if op == "read":
        return ClientProfile(None, (f"{backend.name}+{RESOURCE_PREFIX}" if via_gateway else RESOURCE_PREFIX,))
    if op == "prompt":
        return ClientProfile(None, (backend.exposed(PROMPT_NAME) if via_gateway else PROMPT_NAME,))
    return echo_profile(backend, via_gateway=via_gateway)


def callgrind_wrapper(out: Path) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]


def count_per_call(managed: Managed, out: Path, url: str, backend: Backend, calls: int, op: str, *,
           via_gateway: bool, version: str = SESSION_VERSION, listing: frozenset[str] = frozenset()) -> float:
    """Instructions the process spent per call of `calls` measured ones (every reply checked);
    `listing`: the names a full tools/list gives (for `--op list`; the stub's own without the gateway)."""
    profiles = (profile(op, backend, via_gateway=via_gateway),)
    expected = (listing if via_gateway else frozenset(backend.tools)) if op == "list" else frozenset()
    run_load(LoadSpec(url=url, op=op, requests=WARMUP_CALLS, concurrency=CONCURRENCY, profiles=profiles,
                      timeout=120, protocol_version=version, expect_tools=expected))
    earlier = _dumps(out)
    _control("-i", "on", managed)
    result = run_load(LoadSpec(url=url, op=op, requests=calls, concurrency=CONCURRENCY, profiles=profiles,
                               warmup=0, timeout=120, protocol_version=version, expect_tools=expected))
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
