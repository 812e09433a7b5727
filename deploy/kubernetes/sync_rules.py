"""Write base/prometheusrule.yaml from deploy/prometheus/alerts.yaml (one source of truth).

Run after changing the alerts: `python deploy/kubernetes/sync_rules.py`. A test fails when
the two disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ALERTS = HERE.parent / "prometheus" / "alerts.yaml"
TARGET = HERE / "base" / "prometheusrule.yaml"
HEADER = """\
# GENERATED from deploy/prometheus/alerts.yaml by deploy/kubernetes/sync_rules.py: edit the
# alerts there, then run `python deploy/kubernetes/sync_rules.py`. Needs the Prometheus
# Operator (CRD monitoring.coreos.com/v1); your Prometheus may select rules by a label.
"""


def prometheus_rule(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """The PrometheusRule object carrying `groups` unchanged."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "mcp-gateway",
            "labels": {"app.kubernetes.io/name": "mcp-gateway", "app.kubernetes.io/component": "gateway"},
        },
        "spec": {"groups": groups},
    }


def render(alerts: Path = ALERTS) -> str:
    groups = yaml.safe_load(alerts.read_text(encoding="utf-8"))["groups"]
    body = yaml.safe_dump(prometheus_rule(groups), sort_keys=False, allow_unicode=True, width=120)
    return HEADER + body


def main() -> int:
    TARGET.write_text(render(), encoding="utf-8")
    print(f"wrote {TARGET.relative_to(HERE.parents[1])}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
