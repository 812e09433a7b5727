"""The Kubernetes manifests: schema-valid offline, consistent with each other, the config and the app."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "kubernetes"
BASE = K8S / "base"
OVERLAY = K8S / "overlays" / "example"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yaml"
KUBERNETES_VERSIONS = ("1.28.0", kubernetes_validate.latest_version())
"""The oldest release we support (topology spread, autoscaling/v2, policy/v1 all GA) and the newest known."""
CRD_KINDS = frozenset({"ServiceMonitor", "PrometheusRule"})
GATEWAY = {"app.kubernetes.io/name": "mcp-gateway", "app.kubernetes.io/component": "gateway"}
CHILD_STOP_SECONDS = 4.0
"""Stopping a stdio child after the drain: stdin closed, 2 s, SIGTERM, 2 s (upstream/stdio/upstream.py STOP_WAIT)."""


# ---------------------------------------------------------------- loading


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def _manifests(folder: Path) -> list[dict[str, Any]]:
    """Every object in the folder's YAML files (kustomization.yaml is not an object)."""
    return [doc for path in sorted(folder.glob("*.yaml")) if path.name != "kustomization.yaml"
            for doc in _documents(path)]


def _one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def _kustomize(folder: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize` output (offline: local files only)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (kustomize rendering)")
    rendered = subprocess.run([kubectl, "kustomize", str(folder)], capture_output=True, text=True, timeout=60,
                              check=False)
    assert rendered.returncode == 0, rendered.stderr
    return [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]


def _gateway_config_text(docs: list[dict[str, Any]]) -> str:
    return _one(docs, "ConfigMap", "mcp-gateway-config")["data"]["gateway.yaml"]


def _gateway_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return yaml.safe_load(_gateway_config_text(docs))


def _secret_env(*folders: Path) -> dict[str, str]:
    """What the pods get from the Secret (envFrom): the base's, then the overlay's additions."""
    env: dict[str, str] = {}
    for folder in folders:
        for doc in _manifests(folder):
            if doc["kind"] == "Secret" and doc["metadata"]["name"] == "mcp-gateway-secrets":
                env.update(doc.get("stringData", {}))
    return env


def _containers(docs: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod spec, container) of every workload."""
    for doc in docs:
        if doc["kind"] in {"Deployment", "StatefulSet"}:
            pod = doc["spec"]["template"]["spec"]
            for container in pod["containers"]:
                yield pod, container


def _gateway_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return _one(docs, "Deployment", "mcp-gateway")["spec"]["template"]["spec"]["containers"][0]


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def _load_sync_rules() -> Any:
    spec = importlib.util.spec_from_file_location("sync_rules", K8S / "sync_rules.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BASE_DOCS = _manifests(BASE)
OVERLAY_DOCS = _manifests(OVERLAY)


# ---------------------------------------------------------------- schemas


def _validate(docs: list[dict[str, Any]], version: str) -> None:
    for doc in docs:
        if doc["kind"] in CRD_KINDS:
            _validate_crd(doc)
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} ({version}): {where}: {exc.message}")


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("folder", [BASE, OVERLAY], ids=["base", "overlay"])
def test_every_manifest_file_validates_against_the_kubernetes_schemas(folder: Path, version: str) -> None:
    _validate(_manifests(folder), version)


@pytest.mark.parametrize("folder", [BASE, OVERLAY], ids=["base", "overlay"])
def test_the_kustomizations_render_to_valid_objects(folder: Path) -> None:
    rendered = _kustomize(folder)
    _validate(rendered, KUBERNETES_VERSIONS[-1])
    assert _one(rendered, "Deployment", "mcp-gateway")["spec"]["template"]["spec"]["containers"][0]["image"] \
        == "mcp-gateway:0.1.0"
    if folder == OVERLAY:
        assert {doc["metadata"].get("namespace") for doc in rendered if doc["kind"] != "Namespace"} == {"mcp-gateway"}
        assert "notes-backend" in _gateway_config_text(rendered)


def test_the_base_kustomization_lists_every_manifest_and_nothing_else() -> None:
    listed = yaml.safe_load((BASE / "kustomization.yaml").read_text())["resources"]
    present = sorted(p.name for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == present


# The parts of the Prometheus Operator CRDs (monitoring.coreos.com/v1) these manifests use.
_DURATION = {"type": "string", "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?"
                                          r"(([0-9]+)s)?(([0-9]+)ms)?)$"}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_METADATA = {"type": "object", "required": ["name"],
             "properties": {"name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                            "labels": _STRING_MAP, "annotations": _STRING_MAP, "namespace": {"type": "string"}}}
_RULE = {"oneOf": [
    {"type": "object", "required": ["record", "expr"], "additionalProperties": False,
     "properties": {"record": {"type": "string", "minLength": 1}, "expr": {"type": "string", "minLength": 1},
                    "labels": _STRING_MAP}},
    {"type": "object", "required": ["alert", "expr"], "additionalProperties": False,
     "properties": {"alert": {"type": "string", "minLength": 1}, "expr": {"type": "string", "minLength": 1},
                    "for": _DURATION, "keep_firing_for": _DURATION, "labels": _STRING_MAP,
                    "annotations": _STRING_MAP}},
]}
_SAFE_AUTHORIZATION = {"type": "object", "additionalProperties": False, "properties": {
    "type": {"type": "string"},
    "credentials": {"type": "object", "required": ["key"], "additionalProperties": False,
                    "properties": {"name": {"type": "string"}, "key": {"type": "string"},
                                   "optional": {"type": "boolean"}}}}}
"""The operator's SafeAuthorization: a bearer credential from a Secret in the ServiceMonitor's namespace."""
CRD_SCHEMAS: dict[str, dict[str, Any]] = {
    "ServiceMonitor": {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
                       "properties": {
                           "apiVersion": {"const": "monitoring.coreos.com/v1"}, "metadata": _METADATA,
                           "spec": {"type": "object", "required": ["selector", "endpoints"],
                                    "additionalProperties": False, "properties": {
                                        "jobLabel": {"type": "string"},
                                        "selector": {"type": "object", "additionalProperties": False,
                                                     "properties": {"matchLabels": _STRING_MAP}},
                                        "endpoints": {"type": "array", "minItems": 1, "items": {
                                            "type": "object", "additionalProperties": False, "properties": {
                                                "port": {"type": "string"}, "path": {"type": "string", "pattern": "^/"},
                                                "scheme": {"enum": ["http", "https"]}, "interval": _DURATION,
                                                "scrapeTimeout": _DURATION, "authorization": _SAFE_AUTHORIZATION}}}}}}},
    "PrometheusRule": {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
                       "properties": {
                           "apiVersion": {"const": "monitoring.coreos.com/v1"}, "metadata": _METADATA,
                           "spec": {"type": "object", "required": ["groups"], "additionalProperties": False,
                                    "properties": {"groups": {"type": "array", "minItems": 1, "items": {
                                        "type": "object", "required": ["name", "rules"], "additionalProperties": False,
                                        "properties": {"name": {"type": "string", "minLength": 1},
                                                       "interval": _DURATION,
                                                       "rules": {"type": "array", "items": _RULE}}}}}}}},
}


def _validate_crd(doc: dict[str, Any]) -> None:
    try:
        jsonschema.validate(doc, CRD_SCHEMAS[doc["kind"]])
    except jsonschema.ValidationError as exc:
        pytest.fail(f"{doc['kind']}/{doc['metadata'].get('name')}: {exc.json_path}: {exc.message}")


def test_the_prometheus_rule_holds_exactly_the_rules_of_alerts_yaml() -> None:
    rule = _one(BASE_DOCS, "PrometheusRule")
    alerts = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    assert rule["spec"]["groups"] == alerts["groups"], \
        "deploy/prometheus/alerts.yaml changed: run `python deploy/kubernetes/sync_rules.py`"
    assert (BASE / "prometheusrule.yaml").read_text(encoding="utf-8") == _load_sync_rules().render(ALERTS)
    names = [r.get("alert") or r.get("record") for g in rule["spec"]["groups"] for r in g["rules"]]
    assert len(names) == len(set(names)), "rule names must be unique"


def test_the_alerts_expect_the_job_name_the_service_monitor_produces() -> None:
    """Prometheus Operator names the job after the Service (no jobLabel set)."""
    exprs = " ".join(r["expr"] for g in _one(BASE_DOCS, "PrometheusRule")["spec"]["groups"] for r in g["rules"])
    jobs = set(re.findall(r'job="([^"]+)"', exprs))
    assert "jobLabel" not in _one(BASE_DOCS, "ServiceMonitor")["spec"]
    assert jobs <= {_one(BASE_DOCS, "Service", "mcp-gateway")["metadata"]["name"]}


# ---------------------------------------------------------------- the config


@pytest.mark.parametrize(("docs", "folders"), [(BASE_DOCS, (BASE,)), (OVERLAY_DOCS, (BASE, OVERLAY))],
                         ids=["base", "overlay"])
def test_the_configmap_passes_check_config(docs: list[dict[str, Any]], folders: tuple[Path, ...],
                                           tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(_gateway_config_text(docs), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPGW_")}
    checked = subprocess.run([sys.executable, "-m", "gateway", "check-config", "--config", str(config)],
                             cwd=ROOT, env={**env, **_secret_env(*folders)}, capture_output=True, text=True,
                             timeout=60, check=False)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("ok: 0.0.0.0:8080/mcp")
    assert "store: redis" in checked.stdout


def test_the_config_serves_the_cluster_through_the_in_cluster_redis() -> None:
    config = _gateway_config(BASE_DOCS)
    assert config["server"]["host"] == "0.0.0.0"
    assert urlsplit(config["server"]["public_url"]).scheme == "https"
    assert config["server"]["allowed_origins"]
    redis = urlsplit(config["store"]["redis_url"].replace("${REDIS_PASSWORD}", "x"))
    service = _one(BASE_DOCS, "Service", redis.hostname)
    assert redis.port in {p["port"] for p in service["spec"]["ports"]}
    statefulset = _one(BASE_DOCS, "StatefulSet")
    assert statefulset["spec"]["serviceName"] == service["metadata"]["name"]
    assert _matches(service["spec"]["selector"], statefulset["spec"]["template"]["metadata"]["labels"])
    grace = _gateway_config(BASE_DOCS)["server"]["shutdown_grace_seconds"]
    assert grace == _gateway_config(OVERLAY_DOCS)["server"]["shutdown_grace_seconds"]


def test_every_config_variable_comes_from_the_secret() -> None:
    for docs, folders in ((BASE_DOCS, (BASE,)), (OVERLAY_DOCS, (BASE, OVERLAY))):
        wanted = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", _gateway_config_text(docs)))
        assert wanted <= set(_secret_env(*folders))
    assert {"secretRef": {"name": "mcp-gateway-secrets"}} in _gateway_container(BASE_DOCS)["envFrom"]


# ---------------------------------------------------------------- probes, ports, shutdown


def _app_paths() -> set[str]:
    from gateway.app import create_app
    from gateway.config import parse_config

    config = parse_config(_gateway_config(BASE_DOCS), _secret_env(BASE))
    return {resource.canonical for resource in create_app(config).router.resources()}


def test_probes_and_scrapes_point_at_the_real_paths_and_port() -> None:
    container = _gateway_container(BASE_DOCS)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["http"] == _gateway_config(BASE_DOCS)["server"]["port"]
    probes = {name: container[name]["httpGet"] for name in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert probes["livenessProbe"]["path"] == "/healthz"
    assert probes["startupProbe"]["path"] == "/healthz"
    assert probes["readinessProbe"]["path"] == "/readyz"
    assert {probe["port"] for probe in probes.values()} == {"http"}
    service = _one(BASE_DOCS, "Service", "mcp-gateway")
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
    endpoint = _one(BASE_DOCS, "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    served = _app_paths()
    assert {"/healthz", "/readyz", endpoint["path"]} <= served


def test_the_pod_outlives_the_gateways_drain() -> None:
    from gateway.server import FINAL_FLUSH_SECONDS

    pod = _one(BASE_DOCS, "Deployment", "mcp-gateway")["spec"]["template"]["spec"]
    sleep = pod["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
    assert sleep[0] == "sleep"
    grace = _gateway_config(BASE_DOCS)["server"]["shutdown_grace_seconds"]
    needed = float(sleep[1]) + grace + FINAL_FLUSH_SECONDS + CHILD_STOP_SECONDS
    assert pod["terminationGracePeriodSeconds"] > needed


def test_the_gateway_is_replicated_and_spread() -> None:
    deployment = _one(BASE_DOCS, "Deployment", "mcp-gateway")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert all(_matches(c["labelSelector"]["matchLabels"], labels) for c in spread)
    hpa = _one(BASE_DOCS, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert hpa["spec"]["minReplicas"] == deployment["spec"]["replicas"]
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
    assert _matches(_one(BASE_DOCS, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"], labels)


@pytest.mark.parametrize("docs", [BASE_DOCS, OVERLAY_DOCS], ids=["base", "overlay"])
def test_every_pod_is_locked_down(docs: list[dict[str, Any]]) -> None:
    for pod, container in _containers(docs):
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"]["drop"] == ["ALL"]
        assert {"cpu", "memory"} <= set(container["resources"]["requests"])
        assert "memory" in container["resources"]["limits"]


def test_the_pod_runs_as_the_images_user() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text(encoding="utf-8")
    user = re.findall(r"^USER\s+(\d+)", dockerfile, re.MULTILINE)[-1]
    pod = _one(BASE_DOCS, "Deployment", "mcp-gateway")["spec"]["template"]["spec"]
    assert str(pod["securityContext"]["runAsUser"]) == user


# ---------------------------------------------------------------- selectors and policies


def test_the_selectors_find_the_gateway_pods() -> None:
    labels = _one(BASE_DOCS, "Deployment", "mcp-gateway")["spec"]["template"]["metadata"]["labels"]
    service = _one(BASE_DOCS, "Service", "mcp-gateway")
    assert _matches(service["spec"]["selector"], labels)
    assert _matches(_one(BASE_DOCS, "ServiceMonitor")["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    assert _matches(_one(BASE_DOCS, "NetworkPolicy", "mcp-gateway")["spec"]["podSelector"]["matchLabels"], labels)


def test_the_network_policies_connect_the_gateway_and_redis_only() -> None:
    gateway = _one(BASE_DOCS, "NetworkPolicy", "mcp-gateway")["spec"]
    redis_labels = _one(BASE_DOCS, "StatefulSet")["spec"]["template"]["metadata"]["labels"]
    to_redis = [rule for rule in gateway["egress"]
                if any(_matches(peer.get("podSelector", {}).get("matchLabels", {}), redis_labels)
                       for peer in rule.get("to", []))]
    assert to_redis and to_redis[0]["ports"] == [{"port": 6379, "protocol": "TCP"}]
    assert gateway["ingress"][0]["ports"][0]["port"] == _gateway_config(BASE_DOCS)["server"]["port"]
    redis = _one(BASE_DOCS, "NetworkPolicy", "mcp-gateway-redis")["spec"]
    assert redis["policyTypes"] == ["Ingress", "Egress"] and "egress" not in redis  # Redis calls nobody
    assert [peer["podSelector"]["matchLabels"] for peer in redis["ingress"][0]["from"]] == [GATEWAY]


def test_the_overlay_registers_its_in_cluster_backend_by_service_url() -> None:
    backend = next(b for b in _gateway_config(OVERLAY_DOCS)["backends"] if b["transport"] == "http")
    url = urlsplit(backend["url"])
    service = _one(OVERLAY_DOCS, "Service", url.hostname)
    assert url.port in {p["port"] for p in service["spec"]["ports"]}
    deployment = _one(OVERLAY_DOCS, "Deployment", url.hostname)
    assert _matches(service["spec"]["selector"], deployment["spec"]["template"]["metadata"]["labels"])
    command = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("--port") + 1] == str(url.port)
    assert command[command.index("--host") + 1] == "0.0.0.0"  # not 127.0.0.1: the SDK would refuse the Host
    egress = _one(OVERLAY_DOCS, "NetworkPolicy", "mcp-gateway-to-notes-backend")["spec"]["egress"][0]
    assert egress["ports"] == [{"port": url.port, "protocol": "TCP"}]
