"""The distribution, built once per session: `python -m build` makes the sdist, then the wheel from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from install.venvs import REPO_ROOT

BUILD_TIMEOUT = 300.0


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO_ROOT)], check=True,
                   capture_output=True, timeout=BUILD_TIMEOUT)
    return next(out.glob("mcp_gateway-*.whl"))
