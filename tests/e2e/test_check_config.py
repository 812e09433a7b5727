"""`mcp-gateway check-config` exits 1 on whatever would fail at start, one `config error:` line each."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.timeout(60)

SECRET = "check-config-secret-0123456789abcdef"


def check_config(tmp_path: Path, raw: dict[str, Any], **environ: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **environ}
    return subprocess.run([sys.executable, "-m", "gateway", "check-config", "--config", str(path)], env=env,
                          capture_output=True, text=True, timeout=45)


def config(**sections: Any) -> dict[str, Any]:
    key = {"sha256": hashlib.sha256(b"k").hexdigest(), "tenant": "acme", "subject": "ci"}
    raw = {"auth": {"jwt": {"secret": SECRET}, "api_keys": [key]}, "tenants": {"acme": {"backends": ["*"]}},
           "backends": [{"name": "calc", "transport": "stdio", "command": ["python", "-m", "gateway.demo.calc"]}]}
    return raw | sections


def test_a_config_that_can_start_passes(tmp_path: Path) -> None:
    checked = check_config(tmp_path, config())
    assert checked.returncode == 0, checked.stderr
    assert "backend calc (stdio" in checked.stdout


def test_every_problem_is_listed_with_its_key_path(tmp_path: Path) -> None:
    backends = [{"name": "local", "transport": "stdio", "command": ["mcp-no-such-server"]},
                {"name": "search", "transport": "http", "url": "http://search:8000/mcp",
                 "headers": {"Authorization": "Bearer ${SEARCH_TOKEN:-}"}}]
    checked = check_config(tmp_path, config(backends=backends))
    assert checked.returncode == 1
    assert checked.stderr.splitlines() == [
        "config error: backends[0].command: 'mcp-no-such-server' not found (not on PATH, or not an executable file)",
        "config error: backends[1].headers.Authorization: empty (an environment variable expanded to nothing?)",
    ]
    assert checked.stdout == ""


def test_an_unusable_url_fails(tmp_path: Path) -> None:
    backends = [{"name": "search", "transport": "http", "url": "http://search:99999/mcp"}]
    checked = check_config(tmp_path, config(backends=backends))
    assert (checked.returncode, checked.stderr) == (
        1, "config error: backends[0].url: the port must be a number from 1 to 65535\n")


def test_an_api_key_for_an_unknown_tenant_fails(tmp_path: Path) -> None:
    raw = config()
    raw["auth"]["api_keys"][0]["tenant"] = "ghost"
    checked = check_config(tmp_path, raw)
    assert (checked.returncode, checked.stderr) == (
        1, "config error: auth.api_keys[0].tenant: unknown tenant 'ghost'\n")


@pytest.mark.parametrize("blank", ["", "~"])
def test_an_empty_secret_from_the_environment_fails(tmp_path: Path, blank: str) -> None:
    checked = check_config(tmp_path, config(), MCPGW_AUTH__JWT__SECRET=blank)
    assert checked.returncode == 1
    assert checked.stderr == (
        "config error: auth.jwt.secret: MCPGW_AUTH__JWT__SECRET is empty; unset it to keep the file's value\n")


def test_a_secret_variable_set_but_empty_fails(tmp_path: Path) -> None:
    raw = config()
    raw["auth"]["jwt"]["secret"] = "${GATEWAY_SECRET}"
    checked = check_config(tmp_path, raw, GATEWAY_SECRET="")
    assert (checked.returncode, checked.stderr) == (
        1, "config error: auth.jwt.secret: environment variable GATEWAY_SECRET is not set\n")


def test_rules_that_never_apply_and_globs_that_match_nothing_are_warned_of(tmp_path: Path) -> None:
    rules = [{"name": "no-calc", "effect": "deny", "tools": ["calc__*"]},
             {"name": "leads-add", "effect": "allow", "callers": {"groups": ["leads"]}, "tools": ["calc__add"]},
             {"name": "typo", "effect": "allow", "tools": ["clac__*"]}]
    checked = check_config(tmp_path, config(tenants={"acme": {"backends": ["*"], "rules": rules}}))
    assert checked.returncode == 0, checked.stderr  # warnings: the config still loads and serves
    warnings = [line for line in checked.stdout.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        "warning: tenants.acme.rules[1] (leads-add) never applies in tenant acme: tenants.acme.rules[0] (no-calc) "
        "comes first and covers every caller and item it names",
        "warning: tenants.acme.rules[2].tools[0]: 'clac__*' matches no name of tenant acme's backends"]


def test_virtual_server_items_no_admitted_tenant_could_be_listed_are_warned_of(tmp_path: Path) -> None:
    raw = config()
    raw["backends"].append({"name": "crm", "transport": "stdio", "command": [sys.executable, "-c", "pass"]})
    raw["tenants"] = {"acme": {"backends": ["calc"], "tools": {"allow": ["*"], "deny": ["calc__divide"]},
                               "resources": {"allow": ["calc+public://*"]}},
                      "ops": {"backends": ["*"]}}
    raw["servers"] = {"maths": {"tenants": ["acme"], "tools": [
        {"backend": "calc", "tool": "add"}, {"backend": "calc", "tool": "divide"}, {"backend": "crm", "tool": "x"}],
        "resources": [{"backend": "calc", "uri": "secret://a"}, {"backend": "calc", "uri": "public://a"}]}}
    checked = check_config(tmp_path, raw)
    assert checked.returncode == 0, checked.stderr
    assert [line for line in checked.stdout.splitlines() if line.startswith("warning: ")] == [
        "warning: servers.maths.tools[1]: 'calc__divide' is hidden by the tools globs of every tenant server maths "
        "admits",
        "warning: servers.maths.tools[2]: backend 'crm' is used by no tenant server maths admits",
        "warning: servers.maths.resources[0]: 'calc+secret://a' is hidden by the resources globs of every tenant "
        "server maths admits"]
