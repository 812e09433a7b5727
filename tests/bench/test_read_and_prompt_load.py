"""The load generator's resources/read and prompts/get, against the stub direct and through a gateway.

Run in a subprocess: on pytest's sys.path, `bench` may name this tests/bench folder.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 120

SCRIPT = """
import sys, tempfile
from pathlib import Path
from bench.harness import gateway_config, start_gateway, start_stub
from bench.instructions import profile
from bench.loadgen import LoadSpec, run_load
from bench.procs import ProcessSet

with ProcessSet(Path(tempfile.mkdtemp())) as procs:
    backend = start_stub(procs, tools=3, name="stub").backends[0]
    gateway = start_gateway(procs, gateway_config([backend]))
    for op in ("read", "prompt"):
        for url, via in ((backend.url, False), (gateway.url, True)):
            client = profile(op, backend, via_gateway=via)
            spec = LoadSpec(url=url, op=op, requests=20, concurrency=2, profiles=(client,))
            result = run_load(spec)
            print(op, via, result.requests, result.errors, result.error_samples)
            if result.errors or result.requests != 20:
                sys.exit(1)
"""


@pytest.mark.timeout(RUN_TIMEOUT + 30)
def test_reads_and_prompts_are_answered_and_checked_direct_and_through_the_gateway() -> None:
    completed = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=RUN_TIMEOUT)
    assert completed.returncode == 0, (completed.stdout, completed.stderr[-4000:])
    assert completed.stdout.count(" 20 0 ") == 4, completed.stdout
