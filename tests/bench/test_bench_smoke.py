"""The benchmark runs every scenario at a tiny size, so it never rots.

Timings are never asserted (they depend on the machine); only that every scenario produced
results, every reply was right, and the report files were written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = {"1", "2", "3", "4", "5", "6"}
"""Not imported from `bench`: on pytest's sys.path, `bench` may name this tests/bench folder."""
RUN_TIMEOUT = 240


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("bench-results")
    completed = subprocess.run([sys.executable, "-m", "bench", "--quick", "--out", str(out)], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=RUN_TIMEOUT)
    return completed, out


@pytest.mark.timeout(RUN_TIMEOUT + 30)
def test_the_quick_run_exits_cleanly(quick_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    completed, _ = quick_run
    assert completed.returncode == 0, completed.stderr[-4000:]


@pytest.mark.timeout(RUN_TIMEOUT + 30)
def test_every_scenario_has_results_and_no_errors(quick_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, out = quick_run
    report = json.loads((out / "latest.json").read_text())
    by_scenario = {s["id"].split("-")[0]: s for s in report["scenarios"]}
    assert set(by_scenario) == set(SCENARIOS)
    for scenario in report["scenarios"]:
        assert scenario["failed"] is None, scenario
        if scenario["skipped"]:  # only scenario 6 may skip (no Redis, or no --workers), with a reason
            assert scenario["id"] == "6", scenario
            continue
        assert scenario["rows"], scenario["id"]
        assert scenario["errors"] == 0, scenario
        for row in scenario["rows"]:
            assert row["values"]["requests"] > 0, (scenario["id"], row)


@pytest.mark.timeout(RUN_TIMEOUT + 30)
def test_the_report_files_are_written(quick_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, out = quick_run
    for name in ("latest.json", "latest.md", "latest.png"):
        assert (out / name).stat().st_size > 0, name
    assert len(list(out.glob("2*.json"))) == 1  # the timestamped copy
    markdown = (out / "latest.md").read_text()
    assert "| scenario | target | value | status |" in markdown
    assert (out / "latest.png").read_bytes().startswith(b"\x89PNG")
