"""The scale report: `scale.json` (every figure), `scale.md` (a table per curve), `scale.png` (the curves)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.model import ScenarioResult

COLUMNS = {  # key: (header, format); a curve's table shows the columns its rows have, in this order
    "ready_s": ("ready s", "{:.2f}"), "complete_s": ("all listed s", "{:.2f}"), "build_s": ("build s", "{:.2f}"),
    "first_page_ms": ("list page 1 ms", "{:.2f}"), "drain_ms": ("list all ms", "{:.1f}"),
    "first_list_ms": ("first list ms", "{:.1f}"), "cached_list_ms": ("cached list ms", "{:.1f}"),
    "all_views_s": ("all views s", "{:.2f}"),
    "find_first_ms": ("find_tools 1st ms", "{:.1f}"), "find_ms": ("find_tools ms", "{:.2f}"),
    "find_broad_ms": ("find_tools broad ms", "{:.1f}"),
    "call_ms": ("tools/call ms", "{:.2f}"), "reload_s": ("reload s", "{:.3f}"),
    "refresh_s": ("refresh all s", "{:.3f}"), "refresh_cpu_ms": ("refresh CPU ms", "{:.0f}"),
    "open_s": ("open s", "{:.1f}"),
    "rss_ready_mib": ("RSS ready MiB", "{:.1f}"), "rss_mib": ("RSS MiB", "{:.1f}"),
    "kib_per_session": ("KiB/session", "{:.2f}"), "instructions": ("instructions/call", "{:,.0f}"),
    "change_pct": ("vs smallest", "{:+.1f} %"),
}
LATENCIES = ("first_page_ms", "drain_ms", "first_list_ms", "find_ms", "find_broad_ms", "call_ms")
SECONDS = ("complete_s", "reload_s", "refresh_s", "open_s", "all_views_s")


def write(out: Path, run: dict[str, Any], results: list[ScenarioResult]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "scale.json", out / "scale.md", out / "scale.png"]
    paths[0].write_text(json.dumps({"run": run, "curves": [r.to_dict() for r in results]}, indent=2, default=str))
    paths[1].write_text(markdown(run, results))
    chart(results, paths[2])
    return paths


def markdown(run: dict[str, Any], results: list[ScenarioResult]) -> str:
    machine = run.get("machine", {})
    lines = ["# MCP gateway: scale curves", "",
             f"- command: `{run.get('command')}`",
             f"- run: {run.get('date')}, {run.get('duration_s', 0):.0f} s; each point is one gateway process with "
             "real stub backends; latencies are medians of sequential requests",
             f"- machine: {machine.get('cpu')}, {machine.get('cores')} cores, Python {machine.get('python')}; "
             f"load average at start {machine.get('load_average')}"]
    for result in results:
        lines += ["", f"## {result.title}", ""]
        lines += table(result) if result.rows else [f"**not measured:** {result.failed or result.skipped}"]
        lines += [f"- {note}" for note in result.notes]
    return "\n".join(lines) + "\n"


def table(result: ScenarioResult) -> list[str]:
    keys = [k for k in COLUMNS if any(k in row.values for row in result.rows)]
    lines = ["| " + " | ".join([result.id, *(COLUMNS[k][0] for k in keys)]) + " |", "|" + "---|" * (len(keys) + 1)]
    for row in result.rows:
        cells = [COLUMNS[k][1].format(row.values[k]) if k in row.values else "" for k in keys]
        lines.append("| " + " | ".join([row.label, *cells]) + " |")
    return lines


def chart(results: list[ScenarioResult], path: Path) -> None:
    """One column per curve: latencies and durations (ms, log) on top, resident memory below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = [r for r in results if r.rows and "size" in r.rows[0].values]
    figure, axes = plt.subplots(2, max(len(curves), 1), figsize=(5 * max(len(curves), 1), 8), squeeze=False)
    for column, result in enumerate(curves):
        _panel(axes[0][column], result, [*LATENCIES, *SECONDS], "ms (log)")
        _panel(axes[1][column], result, ("rss_ready_mib", "rss_mib"), "resident memory, MiB")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def _panel(axes: Any, result: ScenarioResult, keys: tuple[str, ...] | list[str], ylabel: str) -> None:
    rows = [row for row in result.rows if "size" in row.values]
    for key in keys:
        points = [(row.values["size"], row.values[key] * (1000 if key in SECONDS else 1))
                  for row in rows if key in row.values]
        if points:
            axes.plot(*zip(*points, strict=True), marker="o", label=COLUMNS[key][0].replace(" s", " (ms)"))
    axes.set_xscale("log")
    if "log" in ylabel:
        axes.set_yscale("log")
    axes.set_xlabel(result.id)
    axes.set_ylabel(ylabel)
    axes.set_title(result.title, fontsize=9)
    axes.legend(fontsize=7)
