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
from typing import Any, NoReturn

from bench.model import ScenarioResult
from bench.procs import ProcessSet
from bench.report import DEFAULT_OUT, machine_info, write_report
from bench.scenarios import SCENARIOS, RunContext, Sizes, run_scenario

MAX_SECONDS = 900
"""The whole run is cut off after this (processes are still cleaned up)."""


class Interrupted(KeyboardInterrupt):
    """SIGTERM or the overall time limit: unwind so every process gets stopped.

    A KeyboardInterrupt, so no `except Exception` on the way (the load generator counts
    those as failed requests) swallows it, and asyncio lets it out of the event loop.
    """


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    keys = [k.strip() for k in args.scenarios.split(",") if k.strip()]
    unknown = [k for k in keys if k not in SCENARIOS]
    if unknown:
        print(f"error: unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    sizes = _sizes(args)
    _install_limits(args.max_seconds)
    started, machine = time.time(), machine_info()  # the load average before we add ours
    workdir = Path(tempfile.mkdtemp(prefix="mcpgw-bench-"))
    results: list[ScenarioResult] = []
    try:
        with ProcessSet(workdir) as procs:
            ctx = RunContext(procs, sizes, say=_say)
            for key in keys:
                _say(f"scenario {key} ...")
                for result in run_scenario(ctx, key):
                    _print_result(result)
                    results.append(result)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, or the time limit (Interrupted)
        results.append(ScenarioResult("run", "interrupted", failed=f"{type(exc).__name__}: {exc}"))
    finally:
        signal.alarm(0)
    run = _run_info(args, sizes, started, machine)
    for path in write_report(Path(args.out), run, results):
        _say(f"wrote {path}")
    return _finish(results, workdir, args.keep_workdir)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description="MCP gateway benchmark")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repetition (the smoke test)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated, e.g. 1,2,3")
    parser.add_argument("--repeat", type=int, help="repetitions per series (median reported)")
    parser.add_argument("--requests", type=int, help="operations per stub tools/call run")
    parser.add_argument("--concurrency", type=int, help="virtual users in the throughput scenarios")
    parser.add_argument("--processes", type=int, help="load-generator processes per throughput series")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="report directory")
    parser.add_argument("--max-seconds", type=int, default=MAX_SECONDS, help="cut the whole run off after this")
    parser.add_argument("--keep-workdir", action="store_true", help="keep configs and process logs")
    return parser


def _sizes(args: argparse.Namespace) -> Sizes:
    sizes = Sizes.quick() if args.quick else Sizes()
    if args.requests:
        sizes = sizes.with_requests(args.requests)
    overrides = {k: getattr(args, k) for k in ("repeat", "concurrency", "processes") if getattr(args, k)}
    return replace(sizes, **overrides)


def _install_limits(max_seconds: int) -> None:
    def interrupt(signum: int, frame: Any) -> NoReturn:
        raise Interrupted(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)  # also keeps asyncio.Runner from installing its own
    signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(max_seconds)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _print_result(result: ScenarioResult) -> None:
    if result.skipped or result.failed:
        _say(f"  [{result.id}] {'skipped' if result.skipped else 'FAILED'}: {result.skipped or result.failed}")
        return
    for row in result.rows:
        shown = ", ".join(f"{k} {v:.4g}" for k, v in row.values.items() if isinstance(v, int | float))
        _say(f"  [{result.id}] {row.label}: {shown}")
        for sample in row.values.get("error_samples", []):
            _say(f"      error: {sample}")
    for target in result.targets:
        _say(f"  [{result.id}] {target.describe()}")
    for note in result.notes:
        _say(f"  [{result.id}] note: {note}")


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
        _say(f"process logs and configs kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    for result in broken:
        _say(f"problem in {result.id}: {result.failed or f'{result.errors} wrong or failed replies'}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
