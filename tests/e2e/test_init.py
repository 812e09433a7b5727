"""`mcp-gateway init [PATH]`: a commented starter config that passes check-config, never overwritten by accident."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)


def gateway(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"),
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "gateway", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=45)


def test_init_writes_a_starter_config_that_passes_check_config(tmp_path: Path) -> None:
    written = gateway(tmp_path, "init")
    assert written.returncode == 0, written.stderr
    path = tmp_path / "gateway.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# A starter config") and "_KEY_SHA256@" not in text
    assert f"check-config --config {path.name}" in written.stdout  # the next step

    checked = gateway(tmp_path, "check-config", "--config", str(path))
    assert checked.returncode == 0, checked.stderr
    assert "backend calc (stdio" in checked.stdout and "tenant team" in checked.stdout

    keys = re.findall(r"mgw_[A-Za-z0-9_-]{40,}", written.stdout)
    assert len(keys) == 2, written.stdout
    for key in keys:  # the file holds only the hashes of the keys it printed
        assert key not in text and hashlib.sha256(key.encode()).hexdigest() in text


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "mine.yaml"
    path.parent.mkdir()
    path.write_text("# my own config\n", encoding="utf-8")
    refused = gateway(tmp_path, "init", str(path))
    assert refused.returncode == 1 and "exists; use --force" in refused.stderr
    assert path.read_text(encoding="utf-8") == "# my own config\n"

    forced = gateway(tmp_path, "init", str(path), "--force")
    assert forced.returncode == 0, forced.stderr
    assert path.read_text(encoding="utf-8").startswith("# A starter config")


def test_the_commented_rule_works_once_uncommented(tmp_path: Path) -> None:
    from importlib.resources import files

    import yaml

    from gateway.config import parse_config
    from gateway.policy import Item, Principal

    text = (files("gateway") / "starter_config.yaml").read_text(encoding="utf-8")
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "# default: allow")
    for i in range(start, len(lines)):
        if not lines[i].startswith("    # "):
            break
        lines[i] = "    " + lines[i][len("    # "):]
    raw = re.sub(r"@\w+_KEY_SHA256@", "a" * 64, "\n".join(lines))
    policy = parse_config(yaml.safe_load(raw), {}).tenants["team"].policy
    evaluate = Item("tools", "calc__evaluate", "calc")
    assert [rule.name for rule in policy.rules] == ["leads-evaluate", "others-no-evaluate"]
    assert policy.decide(Principal("team", "a", groups=frozenset({"leads"})), evaluate).overlay == {
        "expression": {"maxLength": 40}}
    assert not policy.decide(Principal("team", "b"), evaluate).allowed


def test_the_commented_virtual_server_works_once_uncommented() -> None:
    from importlib.resources import files

    import yaml

    from gateway.config import parse_config

    text = (files("gateway") / "starter_config.yaml").read_text(encoding="utf-8")
    lines = text.splitlines()
    start = lines.index("# servers:")
    for i in range(start, len(lines)):
        if not lines[i].startswith("# "):
            break
        lines[i] = lines[i][len("# "):]
    raw = re.sub(r"@\w+_KEY_SHA256@", "a" * 64, "\n".join(lines))
    server = parse_config(yaml.safe_load(raw), {}).servers["temperatures"]
    assert server.admits("team") and not server.admits("ops")
    (tool,) = server.tools
    assert (tool.backend, tool.tool, tool.name, dict(tool.fixed)) == (
        "calc", "convert_units", "to_celsius", {"from_unit": "f", "to_unit": "c"})
