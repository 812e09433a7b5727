"""`python -m bench.scale [--quick] [--curves tools,backends,tenants,sessions] [--tools 100,1000 ...]`.

Exit status 0 when every point was measured, 1 when one failed (the others are still reported).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.model import Row, ScenarioResult
from bench.procs import ProcessSet
from bench.report import DEFAULT_OUT, machine_info
from bench.runs import add_run_options, install_limits, say
from bench.scale import output
from bench.scale.curves import Reps
from bench.scale.estate import bare_start_s
from bench.scale.points import SETUPS, Context, backends_point, instructions, sessions_point, tenants_point, tools_point

CURVES = ("tools", "backends", "tenants", "sessions")
MAX_SECONDS = 1200


@dataclass(frozen=True, slots=True)
class Sizes:
    tools: tuple[int, ...] = (100, 1_000, 10_000, 50_000)
    backends: tuple[int, ...] = (1, 10, 100)
    stdio: int = 4  # stdio children, one more point on the backends curve (0: none)
    tenants: tuple[int, ...] = (1, 100, 1_000)
    sessions: tuple[int, ...] = (1_000, 10_000)
    redis_sessions: tuple[int, ...] = (1_000, 10_000)  # empty: the memory store only
    calls: int = 500  # measured tools/calls per instruction count (0: no counts)
    reps: Reps = field(default_factory=Reps)

    @classmethod
    def quick(cls) -> Sizes:
        return cls(tools=(100, 1_000), backends=(1, 10), stdio=0, tenants=(1, 10), sessions=(100, 1_000),
                   redis_sessions=(), calls=0, reps=Reps(requests=10, drains=2, reloads=1, first_lists=5))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    sizes = _sizes(args)
    curves = [c.strip() for c in args.curves.split(",") if c.strip()]
    if unknown := [c for c in curves if c not in CURVES]:
        say(f"error: unknown curve(s) {', '.join(unknown)}; choose from {', '.join(CURVES)}")
        return 2
    install_limits(args.max_seconds)
    started, machine = time.time(), machine_info()
    workdir = Path(tempfile.mkdtemp(prefix="mcpgw-scale-"))
    results: list[ScenarioResult] = []
    try:
        with ProcessSet(workdir) as procs:
            ctx = Context(procs, sizes.reps, bare_start_s(procs), [])
            results = run_curves(ctx, sizes, curves)
    except KeyboardInterrupt as exc:
        results.append(ScenarioResult("run", "interrupted", failed=f"{type(exc).__name__}: {exc}"))
    finally:
        signal.alarm(0)
    command = shlex.join(["python", "-m", "bench.scale", *(argv if argv is not None else sys.argv[1:])])
    run = {"command": command,
           "date": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started)),
           "duration_s": time.time() - started, "sizes": asdict(sizes), "machine": machine}
    for path in output.write(Path(args.out), run, results):
        say(f"wrote {path}")
    failed = [r for r in results if r.failed]
    if failed or args.keep_workdir:
        say(f"process logs kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


def run_curves(ctx: Context, sizes: Sizes, curves: list[str]) -> list[ScenarioResult]:
    results = []
    for curve in curves:
        say(f"curve {curve} ...")
        result = _curve(ctx, curve, sizes)
        result.notes += ctx.notes
        ctx.notes.clear()
        results.append(result)
    if sizes.calls:
        say("instructions per tools/call ...")
        results.append(_instructions(ctx, sizes, curves))
    return results


TITLES = {
    "tools": "tools in one tenant's view (one backend; `finder` tenant in search mode)",
    "backends": f"backends ({20} tools each; stdio rows: SDK calc servers as children)",
    "tenants": "tenants with distinct views (10 backends x 100 tools; each tenant hides one tool)",
    "sessions": "handshake-era sessions open at once (10 tools)",
}


def _points(curve: str, sizes: Sizes) -> list[tuple[str, int, Callable[[Context, int], dict[str, Any]]]]:
    """(label, size, how to measure it) for every point of a curve."""
    if curve == "tools":
        return [(f"{n:,}", n, tools_point) for n in sizes.tools]
    if curve == "backends":
        stdio = [(f"{sizes.stdio} stdio", sizes.stdio, lambda c, n: backends_point(c, n, stdio=True))]
        return [(f"{n:,} http", n, backends_point) for n in sizes.backends] + (stdio if sizes.stdio else [])
    if curve == "tenants":
        return [(f"{n:,}", n, tenants_point) for n in sizes.tenants]
    return [(f"{n:,} memory", n, sessions_point) for n in sizes.sessions] + [
        (f"{n:,} redis", n, lambda c, n: sessions_point(c, n, redis=True)) for n in sizes.redis_sessions]


def _curve(ctx: Context, curve: str, sizes: Sizes) -> ScenarioResult:
    result = ScenarioResult(curve, TITLES[curve])
    for label, size, point in _points(curve, sizes):
        try:
            values = point(ctx, size)
        except Exception as exc:
            result.failed = _failure(label, exc)
            say(f"  [{curve}] {label}: FAILED {result.failed}")
            continue
        # the plot draws the HTTP and memory-store points as the curve; the others are table rows
        plotted = label.endswith(("http", "memory")) or curve in ("tools", "tenants")
        result.rows.append(Row(label, {**({"size": size} if plotted else {}), **values}))
        say(f"  [{curve}] {label}: " + ", ".join(f"{k} {v:.4g}" for k, v in values.items()))
    return result


def _instructions(ctx: Context, sizes: Sizes, curves: list[str]) -> ScenarioResult:
    """tools/call instructions at the smallest and the largest estate of each curve (HTTP, memory store)."""
    result = ScenarioResult("instructions", f"tools/call instructions per call ({sizes.calls} calls, "
                                            "concurrency 4, session clients)")
    for curve in curves:
        ends = sorted({min(_sizes_of(curve, sizes)), max(_sizes_of(curve, sizes))})
        counts = []
        for size in ends:
            try:
                counts.append(instructions(ctx, SETUPS[curve](ctx.procs, size), sizes.calls, f"cg-{curve}{size}"))
            except Exception as exc:
                result.failed = _failure(f"{curve} {size}", exc)
                break
            change = 100 * (counts[-1] / counts[0] - 1)
            result.rows.append(Row(f"{curve} {size:,}", {"instructions": counts[-1], "change_pct": change}))
            say(f"  [instructions] {curve} {size}: {counts[-1]:,.0f} ({change:+.1f} %)")
    return result


def _sizes_of(curve: str, sizes: Sizes) -> tuple[int, ...]:
    return {"tools": sizes.tools, "backends": sizes.backends, "tenants": sizes.tenants,
            "sessions": sizes.sessions}[curve]


def _failure(label: str, exc: BaseException) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{label}: {type(exc).__name__}: {str(exc)[:500]} (at {where.filename}:{where.lineno})"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description="MCP gateway scale curves")
    parser.add_argument("--quick", action="store_true", help="the smallest sizes, no instruction counts")
    parser.add_argument("--curves", default=",".join(CURVES), help=f"comma-separated, from {','.join(CURVES)}")
    for name in ("tools", "backends", "tenants", "sessions", "redis-sessions"):
        parser.add_argument(f"--{name}", help="comma-separated sizes, e.g. 100,1000 (redis-sessions: '' for none)")
    parser.add_argument("--stdio", type=int, help="stdio children on the backends curve (0: none)")
    parser.add_argument("--calls", type=int, help="measured calls per instruction count (0: no counts)")
    add_run_options(parser, DEFAULT_OUT, MAX_SECONDS)
    return parser


def _sizes(args: argparse.Namespace) -> Sizes:
    sizes = Sizes.quick() if args.quick else Sizes()
    lists = {name: tuple(int(n) for n in getattr(args, name).split(",") if n.strip())
             for name in ("tools", "backends", "tenants", "sessions", "redis_sessions")
             if getattr(args, name) is not None}
    numbers = {name: getattr(args, name) for name in ("stdio", "calls") if getattr(args, name) is not None}
    return replace(sizes, **lists, **numbers)


if __name__ == "__main__":
    sys.exit(main())
