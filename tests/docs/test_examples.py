"""Every config in examples/ passes `mcp-gateway check-config`, given the variables its header names.

Each example starts with a comment that lists what it needs from the environment
(`# Needs: A B C`); the test sets those to values of the right shape and runs the real console
script. Leaving out any one of them must fail the check, naming it: the header is the truth.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gateway import cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
COMMAND = shutil.which("mcp-gateway", path=str(Path(sys.executable).parent)) or "mcp-gateway"


def needs(example: Path) -> list[str]:
    found = re.search(r"^# Needs: (.*)$", example.read_text(encoding="utf-8"), re.MULTILINE)
    assert found, f"{example.name}: no '# Needs:' line in its header"
    return re.findall(r"\b[A-Z][A-Z0-9_]+\b", found.group(1))


def value_for(name: str, tmp_path: Path) -> str:
    """A value of the shape the variable's name says."""
    if name.endswith("_SHA256"):
        return hashlib.sha256(secrets.token_bytes(16)).hexdigest()
    if name == "REDIS_URL":
        return "redis://127.0.0.1:6379/0"
    if name.endswith("_SHARE"):
        return str(tmp_path)
    return secrets.token_urlsafe(48)


def environment(example: Path, tmp_path: Path) -> dict[str, str]:
    return {name: value_for(name, tmp_path) for name in needs(example)}


def test_there_are_the_four_set_ups_the_docs_point_to() -> None:
    assert {e.stem for e in EXAMPLES} >= {"public-http", "team-stdio", "replicas-redis", "identity-provider"}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_example_passes_check_config(example: Path, tmp_path: Path) -> None:
    env = {**os.environ, **environment(example, tmp_path)}
    done = subprocess.run([COMMAND, "check-config", "--config", str(example)], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: "), done.stdout
    assert "config error" not in done.stderr


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_each_variable_it_names_is_needed(example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    env = environment(example, tmp_path)
    for missing in env:
        for name, value in env.items():
            if name == missing:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        assert cli.main(["check-config", "--config", str(example)]) == 1, f"{missing} is not needed"
        assert missing in capsys.readouterr().err
