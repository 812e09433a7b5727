"""`mcp-gateway audit` refuses bad input with one clear line: no traceback, no key, no Redis URL."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from backend_fixtures import free_port

from gateway.cli import main

KEY = "cli-test-key-0123456789abcdef0123456789"


def config(tmp_path: Path, **store: object) -> str:
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump({"backends": [], "tenants": {"acme": {"backends": ["*"]}}, "store": store,
                                    "audit": {"hmac_key": KEY}}))
    return str(path)


@pytest.mark.parametrize(("argv", "status", "says"), [
    (["audit", "verify"], 2, "give FILE... or --redis"),
    (["audit", "verify", "/nonexistent/audit.jsonl"], 1, "cannot read /nonexistent/audit.jsonl"),
    (["audit", "tail", "--since", "yesterday"], 2, "--since must be a span like 30s"),
    (["audit", "tail", "--last", "0"], 2, "--last must be at least 1"),
    (["audit", "tail"], 1, "there is no Redis trail to read"),
])
def test_bad_input_gets_one_line(argv: list[str], status: int, says: str, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--config", config(tmp_path)]) == status
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and "Traceback" not in err and KEY not in err


def test_an_unreachable_redis_is_named_without_its_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"redis://:hunter2-password@127.0.0.1:{free_port()}/0"
    assert main(["audit", "verify", "--redis", "--config", config(tmp_path, redis_url=url)]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the trail's Redis" in err and "hunter2" not in err and "Traceback" not in err


def test_a_file_that_is_not_a_trail_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trail = tmp_path / "notes.txt"
    trail.write_text("hello\n")
    assert main(["audit", "verify", str(trail), "--config", config(tmp_path)]) == 1
    assert f"{trail}:1: not JSON" in capsys.readouterr().out
