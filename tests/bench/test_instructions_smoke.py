"""`python -m bench.instructions` runs at a tiny size (valgrind is on every machine the CI uses)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 240


@pytest.mark.timeout(RUN_TIMEOUT + 30)
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_instruction_counts_come_out_for_the_stub_and_both_paths_through_the_gateway_to_both_eras() -> None:
    completed = subprocess.run([sys.executable, "-m", "bench.instructions", "--calls", "20"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert completed.returncode == 0, completed.stderr[-4000:]
    counts = [int(n.replace(",", "")) for n in re.findall(r"^\s+(?:direct|through).*?([\d,]+)", completed.stdout,
                                                            re.MULTILINE)]
    assert len(counts) == 5, completed.stdout
    stub, *through = counts
    assert 0 < stub < min(through), completed.stdout  # the gateway parses, checks and forwards


def test_a_bad_call_count_is_refused() -> None:
    completed = subprocess.run([sys.executable, "-m", "bench.instructions", "--calls", "0"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert "--calls" in completed.stderr or "not found" in completed.stderr
