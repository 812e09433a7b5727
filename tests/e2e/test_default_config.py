"""The shipped gateway/default_config.yaml (what `make run` serves) builds the demo catalogue."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from backend_fixtures import REPO_ROOT

pytestmark = pytest.mark.timeout(60)

DEMO_TOOLS = {
    "clock__now", "clock__convert", "clock__list_timezones",
    "calc__add", "calc__multiply", "calc__evaluate", "calc__convert_units", "calc__slow",
    "notes__create_note", "notes__list_notes", "notes__get_note", "notes__delete_note", "notes__search_notes",
}  # fmt: skip


def _catalogue(*args: str) -> set[str]:
    # A bare PATH: `python` in the config must still mean the gateway's own interpreter.
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    result = subprocess.run([sys.executable, "-m", "gateway", "catalogue", *args], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=45, check=True)
    return {line.split("\t")[0] for line in result.stdout.splitlines()}


def test_the_default_config_serves_every_demo_tool() -> None:
    assert _catalogue() == DEMO_TOOLS


def test_the_second_demo_tenant_sees_its_narrower_view() -> None:
    assert _catalogue("--tenant", "globex") == {n for n in DEMO_TOOLS if n.startswith(("clock__", "calc__"))} - {
        "calc__slow"}
