"""The Prometheus rule file is valid, and its unit tests fire each alert and keep healthy series silent."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gateway.metrics import SERVER_ERROR_OUTCOMES

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy/prometheus"
PROMTOOL = shutil.which("promtool")

pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (apt-get install -y prometheus)")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=RULES_DIR, capture_output=True, text=True, timeout=60, check=False)


def alerts() -> list[dict[str, object]]:
    groups = yaml.safe_load((RULES_DIR / "alerts.yaml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_accepts_the_rule_file() -> None:
    checked = promtool("check", "rules", "alerts.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_promtool_unit_tests_pass() -> None:
    tested = promtool("test", "rules", "alerts_test.yaml")
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_alert_has_a_runbook_and_a_unit_test() -> None:
    tests = yaml.safe_load((RULES_DIR / "alerts_test.yaml").read_text())["tests"]
    tested = {case["alertname"] for test in tests for case in test.get("alert_rule_test", []) if case["exp_alerts"]}
    for alert in alerts():
        assert alert["annotations"]["runbook"], alert["alert"]  # type: ignore[index]
        assert alert["alert"] in tested, f"{alert['alert']} never fires in alerts_test.yaml"


def test_rules_and_dashboard_count_the_same_outcomes_as_errors() -> None:
    for path in (RULES_DIR / "alerts.yaml", RULES_DIR.parent / "grafana/mcp-gateway.json"):
        regexes = re.findall(r'outcome=~\\?"([^"\\]+)', path.read_text())
        assert regexes, path
        assert all(set(regex.split("|")) == SERVER_ERROR_OUTCOMES for regex in regexes), path
