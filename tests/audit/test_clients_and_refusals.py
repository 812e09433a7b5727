"""Who called, and calls refused before they ran: a real gateway's file trail.

A handshake-era client's name and version come from its `initialize` (a 2026 client sends them in
every request). A call refused after its caller authenticated (a scope the token lacks, a tenant
nobody configured, its rate, its in-flight budget) still leaves one record naming the refusal; a
caller that did not authenticate leaves none (anybody could fill the trail with those).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from conftest import RawClient, StartGateway, make_config, make_token, sdk_client, stdio_backend
from mcp.types import Implementation
from stateless_client import StatelessClient

from gateway import keys
from gateway.transport.session_records import Session, decode, encode

pytestmark = pytest.mark.timeout(60)

TENANTS = {"acme": {"backends": ["*"]},
           "slow": {"backends": ["*"], "rate_limit": {"requests_per_second": 0.001, "burst": 3}},
           "slower": {"backends": ["*"], "rate_limit": {"requests_per_second": 0.001, "burst": 1}}}
"""`slow` affords three messages (a session's initialize and initialized, and one call); `slower`, one."""
ADD = {"name": "calc__add", "arguments": {"a": 1, "b": 2}}


def audited(path: Path, **extra: Any) -> Any:
    return make_config([stdio_backend("calc")], tenants=TENANTS, audit={"enabled": True, "file": str(path)},
                       **extra)


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def records(path: Path, count: int) -> list[dict[str, Any]]:
    """The file's records once `count` are there (the writer runs beside the replies), and no more after."""
    for _ in range(200):
        if len(read(path)) >= count:
            await asyncio.sleep(0.3)  # one more of the writer's pauses: nothing else comes
            return read(path)
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} holds fewer than {count} records")


async def test_a_session_client_is_recorded_by_the_name_and_version_it_gave_at_initialize(
        gateway: StartGateway, tmp_path: Path, raw_client: Any) -> None:
    trail = tmp_path / "audit.jsonl"
    running = await gateway(audited(trail))
    info = Implementation(name="audit-sdk-client", version="9.8.7")
    async with sdk_client(running.url, make_token("acme", sub="alice"), client_info=info) as client:
        assert not (await client.call_tool("calc__add", {"a": 1, "b": 2})).is_error
    raw: RawClient = raw_client(running.url, make_token("acme", sub="bob"))
    await raw.initialize()  # clientInfo {"name": "raw", "version": "1"}
    await raw.call("tools/call", ADD)
    by_subject = {r["subject"]: r for r in await records(trail, 2)}
    assert by_subject["alice"]["client"] == {"name": "audit-sdk-client", "version": "9.8.7"}
    assert by_subject["bob"]["client"] == {"name": "raw", "version": "1"}
    assert {r["era"] for r in by_subject.values()} == {"session"}
    assert all(r["bytes_in"] > 0 and r["bytes_out"] > 0 for r in by_subject.values())


def test_a_stored_session_keeps_its_client_and_an_older_record_reads_without_one() -> None:
    session = Session("s1", "acme", "alice", "2025-11-25", 1.0, 1.0, client={"name": "c", "version": "2"})
    assert decode("s1", encode(session), 5.0).client == {"name": "c", "version": "2"}  # type: ignore[union-attr]
    older = b'{"tenant":"acme","subject":"alice","protocol_version":"2025-11-25","created_at":1.0}'
    assert decode("s1", older, 5.0).client is None  # type: ignore[union-attr]


async def test_calls_refused_after_authentication_are_recorded_and_unauthenticated_ones_are_not(
        gateway: StartGateway, tmp_path: Path, raw_client: Any) -> None:
    trail = tmp_path / "audit.jsonl"
    config = audited(trail, auth={"tool_scopes": {"calc__evaluate": ["calc:evaluate"]}})
    running = await gateway(config)
    slow: RawClient = raw_client(running.url, make_token("slow", sub="sam"))
    await slow.initialize()
    await slow.call("tools/call", ADD)  # its third message: within its burst
    assert (await slow.post(slow.request("tools/call", ADD)))[0] == 429
    scoped: RawClient = raw_client(running.url, make_token("acme", sub="sue"))
    await scoped.initialize()
    evaluate = {"name": "calc__evaluate", "arguments": {"expression": "1+1"}}
    assert (await scoped.post(scoped.request("tools/call", evaluate)))[0] == 403
    nobody: RawClient = raw_client(running.url, make_token("nobody-configured", sub="nat"))
    assert (await nobody.post(nobody.request("tools/call", ADD)))[0] == 403  # a valid token, an unknown tenant
    garbage: RawClient = raw_client(running.url, "not-a-token")
    assert (await garbage.post(garbage.request("tools/call", ADD)))[0] == 401
    async with aiohttp.ClientSession() as http:
        modern = StatelessClient(http, running.url, make_token("slower", sub="mo"))
        assert (await modern.post(modern.request("tools/call", ADD)))[0] == 200
        assert (await modern.post(modern.request("tools/call", ADD)))[0] == 429
    found = await records(trail, 6)
    by = {(r["subject"], r["outcome"]): r for r in found}
    assert sorted(by) == [("mo", "ok"), ("mo", "rate_limited"), ("nat", "forbidden"), ("sam", "ok"),
                          ("sam", "rate_limited"), ("sue", "forbidden")] and len(found) == 6
    limited = by["sam", "rate_limited"]
    assert (limited["name"], limited["tenant"], limited["era"], limited["policy"]) == ("calc__add", "slow",
                                                                                      "session", None)
    assert limited["duration_ms"] is None and limited["backend"] is None and limited["error"]["code"] == -32600
    assert limited["arguments_sha256"] == by["sam", "ok"]["arguments_sha256"]
    assert by["sue", "forbidden"]["policy"] == {"denied": "scope", "rule": None}
    assert by["nat", "forbidden"]["policy"] == {"denied": "tenant", "rule": None}
    stateless = by["mo", "rate_limited"]
    assert (stateless["era"], stateless["protocol_version"], stateless["client"]) == (
        "stateless", "2026-07-28", {"name": "raw-2026", "version": "1"})
    assert not any(r["subject"] in (None, "anonymous") for r in found)  # nothing for the 401


async def test_a_call_over_the_in_flight_budget_is_recorded(gateway: StartGateway, tmp_path: Path,
                                                            raw_client: Any) -> None:
    trail = tmp_path / "audit.jsonl"
    tenants = {"acme": {"backends": ["*"], "limits": {"in_flight": 1}}}
    running = await gateway(make_config([stdio_backend("calc")], tenants=tenants,
                                        audit={"enabled": True, "file": str(trail)}))
    client: RawClient = raw_client(running.url, make_token("acme", sub="ida"))
    await client.initialize()
    exchange = running.app[keys.EXCHANGE]
    exchange.busy["acme"] = 1  # one call of the tenant's in flight already
    assert (await client.post(client.request("tools/call", ADD)))[0] == 429
    exchange.busy["acme"] = 0
    (record,) = await records(trail, 1)
    assert (record["outcome"], record["error"]["reason"], record["subject"]) == ("rate_limited", "limit", "ida")
    assert record["bytes_in"] > 0  # its context was made: its size is the request's
