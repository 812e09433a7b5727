"""The audit trail in a file, end to end: official SDK clients call a real backend through the gateway.

Issue 29, "Done when": a few hundred calls leave exactly one record each, with the right subject and
outcome; `audit verify` passes on the trail, then fails naming the record after one byte of one record
is changed, or one record is deleted. Arguments appear only as their digest unless configured, and a
token never appears.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import JWT_SECRET, StartGateway, make_config, make_token, sdk_client, stdio_backend
from mcp.shared.exceptions import MCPError

from gateway import keys
from gateway.cli import main

pytestmark = pytest.mark.timeout(120)

HMAC_KEY = "audit-test-key-0123456789abcdef0123456789"
CALLS_PER_CLIENT = 150


def audit_config(path: Path, **audit: Any) -> Any:
    return make_config([stdio_backend("calc")],
                       audit={"enabled": True, "file": str(path), "hmac_key": HMAC_KEY, **audit})


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []


async def settled(app: Any, path: Path, count: int) -> list[dict[str, Any]]:
    """The file's records once `count` are there (the writer runs beside the replies)."""
    for _ in range(200):
        if len(found := records(path)) >= count:
            return found
        await asyncio.sleep(0.05)
    return records(path)


async def calls(url: str, subject: str, count: int) -> None:
    async with sdk_client(url, make_token("acme", sub=subject)) as client:
        for n in range(count):
            result = await client.call_tool("calc__add", {"a": n, "b": 1})
            assert not result.is_error
        with pytest.raises(MCPError, match="Unknown tool"):  # refused, and still audited
            await client.call_tool("calc__nope", {})


def write_verify_config(tmp_path: Path) -> str:
    path = tmp_path / "verify.yaml"
    path.write_text(yaml.safe_dump({"auth": {"jwt": {"secret": JWT_SECRET}}, "backends": [],
                                    "tenants": {"acme": {"backends": ["*"]}},
                                    "audit": {"hmac_key": HMAC_KEY}}))
    return str(path)


async def test_every_call_has_one_record_with_its_subject_and_outcome(gateway: StartGateway, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    trail = tmp_path / "audit.jsonl"
    running = await gateway(audit_config(trail))
    await asyncio.gather(calls(running.url, "alice", CALLS_PER_CLIENT), calls(running.url, "bob", CALLS_PER_CLIENT))
    found = await settled(running.app, trail, 2 * (CALLS_PER_CLIENT + 1))
    assert len(found) == 2 * (CALLS_PER_CLIENT + 1)
    assert len({r["request_id"] for r in found}) == len(found)  # one record per call, none twice
    for subject in ("alice", "bob"):
        mine = [r for r in found if r["subject"] == subject]
        assert sorted(r["outcome"] for r in mine) == ["invalid_params"] + ["ok"] * CALLS_PER_CLIENT
        assert {(r["tenant"], r["method"], r["era"]) for r in mine} == {("acme", "tools/call", "session")}
    ok = next(r for r in found if r["outcome"] == "ok")
    assert (ok["name"], ok["original"], ok["backend"]) == ("calc__add", "add", "calc")
    sent = [{"b": 1, "a": n} for n in range(CALLS_PER_CLIENT)]  # digests of canonical JSON: sorted keys
    assert {r["arguments_sha256"] for r in found if r["outcome"] == "ok"} == {
        hashlib.sha256(json.dumps(args, separators=(",", ":"), sort_keys=True).encode()).hexdigest() for args in sent}
    assert "arguments" not in ok and ok["bytes_in"] > 0 and ok["bytes_out"] > 0 and ok["duration_ms"] > 0
    refused = next(r for r in found if r["outcome"] != "ok")
    assert refused["error"]["code"] == -32602 and refused["original"] is None
    assert make_token("acme", sub="alice")[:20] not in trail.read_text()  # no token, ever

    assert main(["audit", "verify", str(trail), "--config", write_verify_config(tmp_path)]) == 0
    assert f"ok: {len(found)} records in 1 chains" in capsys.readouterr().out
    assert running.app[keys.AUDIT] is not None


def tamper(path: Path, line: int, change: Any) -> Path:
    lines = path.read_bytes().split(b"\n")
    changed = path.with_name(f"changed-{line}.jsonl")
    changed.write_bytes(b"\n".join(change(lines, line)))
    return changed


def one_byte(lines: list[bytes], line: int) -> list[bytes]:
    at = lines[line - 1].index(b'"subject":"') + len(b'"subject":"')
    text = bytearray(lines[line - 1])
    text[at] = ord("x") if text[at] != ord("x") else ord("y")
    return [*lines[:line - 1], bytes(text), *lines[line:]]


def deleted(lines: list[bytes], line: int) -> list[bytes]:
    return [*lines[:line - 1], *lines[line:]]


def swapped(lines: list[bytes], line: int) -> list[bytes]:
    return [*lines[:line - 1], lines[line], lines[line - 1], *lines[line + 1:]]


async def test_verify_names_the_record_changed_removed_or_reordered(gateway: StartGateway, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    trail = tmp_path / "audit.jsonl"
    running = await gateway(audit_config(trail))
    await calls(running.url, "carol", 9)
    await settled(running.app, trail, 10)
    config = write_verify_config(tmp_path)
    seq_of = {n: rec["seq"] for n, rec in enumerate(records(trail), start=1)}
    cases = {"changed": (one_byte, 4, "MAC does not match"), "deleted": (deleted, 6, "should come before it"),
             "reordered": (swapped, 3, "should come before it")}
    for name, (change, line, says) in cases.items():
        capsys.readouterr()
        assert main(["audit", "verify", str(tamper(trail, line, change)), "--config", config]) == 1, name
        out = capsys.readouterr().out
        assert f"changed-{line}.jsonl:{line} (chain" in out and says in out, (name, out)
        assert f"seq {seq_of[line + 1] if name == 'deleted' else seq_of[line + (name == 'reordered')]}," in out
        assert HMAC_KEY not in out
