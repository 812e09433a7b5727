"""`python -m bench.scale --quick` measures every curve at its smallest sizes and writes its report.

Timings are only checked to be plausible (positive, and well under the probes' timeouts): their
size depends on the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
CURVES = {"tools", "backends", "tenants", "sessions"}
RUN_TIMEOUT = 120


@pytest.mark.timeout(RUN_TIMEOUT + 30)
def test_the_quick_scale_run_writes_a_table_and_a_plot_with_plausible_numbers(tmp_path: Path) -> None:
    completed = subprocess.run([sys.executable, "-m", "bench.scale", "--quick", "--out", str(tmp_path)],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert completed.returncode == 0, completed.stderr[-4000:]
    report = json.loads((tmp_path / "scale.json").read_text())
    curves = {curve["id"]: curve for curve in report["curves"]}
    assert set(curves) == CURVES
    for curve in curves.values():
        assert curve["failed"] is None, curve
        assert len(curve["rows"]) >= 2, curve["id"]
        for row in curve["rows"]:
            values = row["values"]
            assert 10 < values["rss_mib"] < 4096, (curve["id"], row)
            assert 0 < values["ready_s"] <= values["complete_s"] < 60, (curve["id"], row)
            latencies = [k for k in values if k.endswith("_ms") and k != "refresh_cpu_ms"]
            assert all(0 < values[k] < 10_000 for k in latencies), (curve["id"], row)
            assert 0 <= values.get("refresh_cpu_ms", 0) < 10_000, (curve["id"], row)  # CPU ticks: 0 is possible
    assert curves["tools"]["rows"][-1]["values"]["find_ms"] > 0
    markdown = (tmp_path / "scale.md").read_text()
    assert "| tools | ready s |" in markdown and "python -m bench.scale --quick" in markdown
    assert (tmp_path / "scale.png").read_bytes().startswith(b"\x89PNG")
