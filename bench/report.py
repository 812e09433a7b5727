"""The benchmark's report: JSON (timestamped and latest), a Markdown table, a PNG chart.

`latest.md` shows per scenario direct vs gateway with ratios, and every target with
PASS/MISS; the machine it ran on heads both files, since numbers from a busy 2-core box
and a quiet 32-core one are not comparable.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from bench.model import Row, ScenarioResult, ratio

DEFAULT_OUT = Path(__file__).resolve().parent / "results"
COLUMNS = {  # key: (header, format); rows show the columns they have, in this order
    "requests": ("requests", "{:.0f}"), "errors": ("errors", "{:.0f}"), "rps": ("rps", "{:,.0f}"),
    "p50_ms": ("p50 ms", "{:.3f}"), "p90_ms": ("p90 ms", "{:.3f}"), "p99_ms": ("p99 ms", "{:.3f}"),
    "max_ms": ("max ms", "{:.3f}"), "tools": ("tools", "{:.0f}"), "ready_s": ("ready s", "{:.3f}"),
    "rss_ready_kib": ("RSS ready MiB", "{:.1f}"), "rss_listed_kib": ("RSS listed MiB", "{:.1f}"),
}
KIB_COLUMNS = frozenset({"rss_ready_kib", "rss_listed_kib"})


def machine_info() -> dict[str, Any]:
    return {"cpu": _cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
            "os": platform.platform(), "load_average": [round(x, 2) for x in os.getloadavg()]}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def write_report(out: Path, run: dict[str, Any], results: list[ScenarioResult]) -> list[Path]:
    """Write the four files; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    data = {"run": run, "scenarios": [r.to_dict() for r in results]}
    text = json.dumps(data, indent=2, default=str)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(run.get("started", time.time())))
    paths = [out / f"{stamp}.json", out / "latest.json", out / "latest.md", out / "latest.png"]
    paths[0].write_text(text)
    paths[1].write_text(text)
    paths[2].write_text(markdown(run, results))
    chart(results, paths[3])
    return paths


# ---------------------------------------------------------------- Markdown


def markdown(run: dict[str, Any], results: list[ScenarioResult]) -> str:
    machine = run.get("machine", {})
    lines = ["# MCP gateway benchmark", "",
             f"- run: {run.get('date', '')}, {run.get('duration_s', 0):.0f} s, mode {run.get('mode', '')}, "
             f"repeat {run.get('repeat', '')}: each number is the median over the repetitions, except "
             "requests and errors (totals)",
             f"- machine: {machine.get('cpu')}, {machine.get('cores')} cores, Python {machine.get('python')}, "
             f"{machine.get('os')}",
             f"- load average (1, 5, 15 min) at start {machine.get('load_average')}, at end "
             f"{machine.get('load_average_end')}: other work on the machine skews the numbers", ""]
    lines += ["## Targets", "", "| scenario | target | value | status |", "|---|---|---|---|"]
    for result in results:
        for target in result.targets:
            value = "n/a" if target.value is None else f"{target.value:.3g}{target.unit}"
            lines.append(f"| {result.id} | {target.name} {target.op} {target.limit:g}{target.unit} | {value} "
                         f"| {target.status} |")
    for result in results:
        lines += ["", f"## {result.id}: {result.title}", ""]
        lines += _scenario_body(result)
    return "\n".join(lines) + "\n"


def _scenario_body(result: ScenarioResult) -> list[str]:
    if result.skipped or result.failed:
        return [f"**{'skipped' if result.skipped else 'FAILED'}:** {result.skipped or result.failed}"]
    lines = _table(result.rows)
    if result.metrics:
        lines += ["", "; ".join(f"{k} = {v:.3g}" for k, v in result.metrics.items())]
    lines += [f"- {note}" for note in result.notes]
    for row in result.rows:
        for sample in row.values.get("error_samples", []):
            lines.append(f"- error in {row.label}: `{sample}`")
    return lines


def _table(rows: list[Row]) -> list[str]:
    keys = [k for k in COLUMNS if any(k in r.values for r in rows)]
    with_ratio = "rps" in keys and any(_baseline(rows, r) for r in rows)
    header = ["series", *(COLUMNS[k][0] for k in keys)] + (["rps / direct", "p50 added ms"] if with_ratio else [])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [row.label] + [_cell(row, k) for k in keys]
        if with_ratio:
            cells += _versus_direct(row, _baseline(rows, row))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _versus_direct(row: Row, base: Row | None) -> list[str]:
    if base is None:
        return ["", ""]
    return [f"{ratio(row.get('rps'), base.get('rps')):.2f}", f"{row.get('p50_ms') - base.get('p50_ms'):+.3f}"]


def _cell(row: Row, key: str) -> str:
    if key not in row.values:
        return ""
    value = row.values[key] / 1024 if key in KIB_COLUMNS else row.values[key]
    return COLUMNS[key][1].format(value)


def _baseline(rows: list[Row], row: Row) -> Row | None:
    """The direct row a gateway row compares with ("gateway c32" → "direct c32", else "direct")."""
    if row.label.startswith("direct"):
        return None
    last = row.label.split()[-1]
    wanted = f"direct {last}" if last[:1] == "c" and last[1:].isdigit() else "direct"
    return next((r for r in rows if r.label == wanted), None)


# ---------------------------------------------------------------- PNG


def chart(results: list[ScenarioResult], path: Path) -> None:
    """Left: latency percentiles of the direct/gateway pairs; right: throughput of every load series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(15, 7))
    _latency_panel(left, [r for r in results if r.id.startswith("1-") and r.rows])
    _throughput_panel(right, [r for r in results if r.rows and "rps" in r.rows[0].values and not r.id.startswith("1-")])
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _latency_panel(axes: Any, results: list[ScenarioResult]) -> None:
    labels = [f"{r.id} {row.label}" for r in results for row in r.rows]
    rows = [row for r in results for row in r.rows]
    if not any(row.get("p50_ms") > 0 for row in rows):
        _no_data(axes, "tools/call at concurrency 1")
        return
    width = 0.25
    for i, key in enumerate(("p50_ms", "p90_ms", "p99_ms")):
        axes.bar([x + (i - 1) * width for x in range(len(rows))], [row.get(key) for row in rows], width,
                 label=key.replace("_ms", ""))
    axes.set_xticks(range(len(rows)), labels, rotation=30, ha="right")
    axes.set_yscale("log")
    axes.set_ylabel("latency, ms (log)")
    axes.set_title("tools/call at concurrency 1: direct vs gateway")
    axes.legend()


def _throughput_panel(axes: Any, results: list[ScenarioResult]) -> None:
    labels = [f"{r.id} {row.label}" for r in results for row in r.rows]
    values = [row.get("rps") for r in results for row in r.rows]
    if not any(v > 0 for v in values):
        _no_data(axes, "throughput")
        return
    colours = ["#999999" if label.split()[1] == "direct" else "#1f77b4" for label in labels]
    axes.barh(range(len(values)), values, color=colours)
    axes.set_yticks(range(len(values)), labels)
    axes.invert_yaxis()
    axes.set_xscale("log")
    axes.set_xlabel("requests per second (log); grey: direct, blue: gateway")
    axes.set_title("throughput")


def _no_data(axes: Any, title: str) -> None:
    """An interrupted or partial run still gets a chart file, saying what is missing."""
    axes.text(0.5, 0.5, "no data in this run", ha="center", va="center", transform=axes.transAxes)
    axes.set_title(title)
    axes.set_axis_off()
