"""The dashboard's latency panels link exemplars to traces: the provisioned Prometheus source names the
exemplar label the gateway writes, and points it at a trace data source that is provisioned too."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from gateway.metrics import exemplar

GRAFANA = Path(__file__).resolve().parents[2] / "deploy" / "grafana"


def test_exemplars_of_the_latency_panels_link_to_the_trace_source() -> None:
    sources = yaml.safe_load((GRAFANA / "provisioning" / "datasources.yaml").read_text())["datasources"]
    by_uid = {source["uid"]: source for source in sources}
    (link,) = by_uid["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]
    label = set(exemplar("r1", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")) - {"request_id"}
    assert {link["name"]} == label
    assert by_uid[link["datasourceUid"]]["type"] == "tempo"
    dashboard = json.loads((GRAFANA / "mcp-gateway.json").read_text())
    latency = [panel for panel in dashboard["panels"] if "latency" in panel["title"].lower() and "targets" in panel]
    assert latency and all(target.get("exemplar") for panel in latency for target in panel["targets"])
