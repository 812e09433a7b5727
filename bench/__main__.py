"""`python -m bench [--quick] [--scenarios 1,2,3] [--repeat N] [--requests N] [--out DIR]`.

Exit status: 0 when every scenario ran and every reply was right; 1 otherwise. Targets
missed (MISS) do not change it: timings depend on the machine and are for people to judge.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench.model import ScenarioResult
from bench.procs import ProcessSet
from bench.report import DEFAULT_OUT, machine_info, write_report
from bench.runs import add_run_options, install_limits, say
from bench.scenarios import SCENARIOS, RunContext, Sizes, run_scenario

MAX_SECONDS = 900
"""The whole run is cut off after this (processes are still cleaned up)."""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    keys = [k.strip() for k in args.scenarios.split(",") if k.strip()]
    unknown = [k for k in keys if k not in SCENARIOS]
    if unknown:
        print(f"error: unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    sizes = _sizes(args)
    install_limits(args.max_seconds)
    started, machine = time.time(), machine_info()  # the load average before we add ours
    workdir = Path(tempfile.mkdtemp(prefix="mcpgw-bench-"))
    results: list[ScenarioResult] = []
    try:
        with ProcessSet(workdir) as procs:
            ctx = RunContext(procs, sizes, say=say)
            for key in keys:
                say(f"scenario {key} ...")
                for result in run_scenario(ctx, key):
                    _print_result(result)
                    results.append(result)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, or the time limit (runs.Interrupted)
        results.append(ScenarioResult("run", "interrupted", failed=f"{type(exc).__name__}: {exc}"))
    finally:
        signal.alarm(0)
    run = _run_info(args, sizes, started, machine)
    for path in write_report(Path(args.out), run, results):
        say(f"wrote {path}")
    return _finish(results, workdir, args.keep_workdir)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description="MCP gateway benchmark")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repetition (the smoke test)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated, e.g. 1,2,3")
    parser.add_argument("--repeat", type=int, help="repetitions per series (median reported)")
    parser.add_argument("--requests", type=int, help="operations per stub tools/call run")
    parser.add_argument("--concurrency", type=int, help="virtual users in the throughput scenarios")
    parser.add_argument("--processes", type=int, help="load-generator processes per throughput series")
    add_run_options(parser, DEFAULT_OUT, MAX_SECONDS)
    return parser


def _sizes(args: argparse.Namespace) -> Sizes:
    sizes = Sizes.quick() if args.quick else Sizes()
    if args.requests:
        sizes = sizes.with_requests(args.requests)
    overrides = {k: getattr(args, k) for k in ("repeat", "concurrency", "processes") if getattr(args, k)}
    return replace(sizes, **overrides)


def _print_result(result: ScenarioResult) -> None:
    if result.skipped or result.failed:
        say(f"  [{result.id}] {'skipped' if result.skipped else 'FAILED'}: {result.skipped or result.failed}")
        return
    for row in result.rows:
        shown = ", ".join(f"{k} {v:.4g}" for k, v in row.values.items() if isinstance(v, int | float))
        say(f"  [{result.id}] {row.label}: {shown}")
        for sample in row.values.get("error_samples", []):
            say(f"      error: {sample}")
    for target in result.targets:
        say(f"  [{result.id}] {target.describe()}")
    for note in result.notes:
        say(f"  [{result.id}] note: {note}")


def _run_info(args: argparse.Namespace, sizes: Sizes, started: float, machine: dict[str, Any]) -> dict[str, Any]:
    return {"started": started, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started)),
            "duration_s": time.time() - started, "mode": "quick" if args.quick else "full",
            "repeat": sizes.repeat, "sizes": asdict(sizes),
            "machine": {**machine, "load_average_end": [round(x, 2) for x in os.getloadavg()]}}


def _finish(results: list[ScenarioResult], workdir: Path, keep: bool) -> int:
    broken = [r for r in results if r.failed or r.errors]
    for result in results:
        for target in result.targets:
            print(f"{result.id:>10}  {target.status:4}  {target.describe()}")
    if broken or keep:
        say(f"process logs and configs kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    for result in broken:
        say(f"problem in {result.id}: {result.failed or f'{result.errors} wrong or failed replies'}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
