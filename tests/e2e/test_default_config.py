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
    "notes__link_note",
}  # fmt: skip


DEMO_PROMPTS_AND_RESOURCES = {
    ("clock__plan_meeting", "prompts"), ("calc__explain", "prompts"), ("notes__summarize_note", "prompts"),
    ("clock+clock://zones", "resources"), ("notes+notes://index", "resources"),
    ("calc+calc://squares/{count}", "templates"), ("notes+notes://note/{id}", "templates"),
}  # fmt: skip


def _listing(*args: str) -> list[list[str]]:
    # A bare PATH: `python` in the config must still mean the gateway's own interpreter.
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    result = subprocess.run([sys.executable, "-m", "gateway", "catalogue", *args], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=45, check=True)
    return [line.split("\t") for line in result.stdout.splitlines()]


def _catalogue(*args: str) -> set[str]:
    return {name for name, _, summary in _listing(*args) if not summary.startswith("[")}


def test_the_default_config_serves_the_demo_prompts_resources_and_templates() -> None:
    listed = {(name, summary[1:].split("]")[0]) for name, _, summary in _listing() if summary.startswith("[")}
    assert listed == DEMO_PROMPTS_AND_RESOURCES


def test_the_default_config_serves_every_demo_tool() -> None:
    assert _catalogue() == DEMO_TOOLS


def test_the_second_demo_tenant_sees_its_narrower_view() -> None:
    assert _catalogue("--tenant", "globex") == {n for n in DEMO_TOOLS if n.startswith(("clock__", "calc__"))} - {
        "calc__slow"}
