"""npm packages the tests run (the conformance suite, oidc-provider, MCP Inspector, reference servers).

Each is pinned and installed once into its own git-ignored folder at the repository root. Only
`npm` has to be on PATH. When it is missing or the install fails, the test skips, unless its
`require_env` variable is 1 (`.ci/run` sets them), which makes that a failure instead.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

INSTALL_TIMEOUT_SECONDS = 300


def unavailable(reason: str, require_env: str) -> None:
    """Skip the test, or fail it where the environment says the package must be here."""
    if os.environ.get(require_env) == "1":
        pytest.fail(f"{reason} ({require_env}=1: it must run here)")
    pytest.skip(reason)


def ensure(folder: Path, packages: Sequence[str], *, installed: Callable[[], bool], what: str,
           require_env: str, timeout: float = INSTALL_TIMEOUT_SECONDS) -> None:
    """`npm install` `packages` into `folder` unless `installed()` says they are there.

    One install at a time per folder (a file lock), so tests in parallel processes never race.
    """
    folder.mkdir(exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed():
            return
        npm = shutil.which("npm")
        if npm is None:
            unavailable(f"npm is not installed, so {what} cannot be installed", require_env)
        command = [npm, "install", "--prefix", str(folder), "--no-save", "--no-package-lock", "--no-audit",
                   "--no-fund", "--loglevel=error", *packages]
        try:
            subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=True)
        except (OSError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", "") or str(exc)
            unavailable(f"npm could not install {what}: {detail.strip()[-500:]}", require_env)
        if not installed():
            unavailable(f"{what} did not install into {folder}", require_env)
