"""Issue 17, items 5, 6, 8 and 9: what the front door shows, how it fails, which tokens it takes, what it logs.

/metrics and the Host/Origin check run on the real app on 127.0.0.1; bad input, hang-ups and
log amplification on a served process, whose own output must hold no traceback; JWT checks
on the real app (admin endpoints: tests/e2e/test_admin.py).
"""

from __future__ import annotations

import asyncio
import gzip
import time
from typing import Any

import aiohttp
import jwt
import orjson
import pytest
from conftest import JWT_SECRET, SCRAPE_TOKEN, RawClient, StartGateway, make_config, make_token, stdio_backend
from lifecycle.processes import HOST
from prometheus_client.parser import text_string_to_metric_families

from gateway.logs import MAX_LOGGED_CHARS
from hardening.helpers import ATTACKER_KEY, LEGIT_KEY, headers, initialize, legit_client, log_lines, until

pytestmark = pytest.mark.timeout(120)


async def _get(url: str, **extra: str) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as http, http.get(url, headers=extra) as response:
        return response.status, await response.read()


# ---------------------------------------------------------------- item 5: /metrics and Host/Origin


async def test_metrics_are_not_served_on_the_main_port_by_default(gateway: StartGateway) -> None:
    running = await gateway(make_config([stdio_backend("calc")], metrics={}))
    assert (await _get(running.base + "metrics"))[0] == 404


async def test_metrics_on_the_main_port_need_the_scrape_token(gateway: StartGateway) -> None:
    running = await gateway(make_config([stdio_backend("calc")], tenants={"acme": {}, "globex": {}}))
    url = running.base + "metrics"
    assert (await _get(url))[0] == 401
    assert (await _get(url, Authorization=f"Bearer {make_token('acme', scope='mcpgw:admin')}"))[0] == 401
    status, body = await _get(url, Authorization=f"Bearer {SCRAPE_TOKEN}")
    assert status == 200 and b'tenant="globex"' in body


@pytest.mark.parametrize("path", ["/metrics", "/healthz", "/readyz", "/admin/backends", "/mcp"])
async def test_the_host_and_origin_check_covers_every_path(gateway: StartGateway, path: str) -> None:
    running = await gateway(make_config([stdio_backend("calc")]))
    url = running.base.rstrip("/") + path
    scrape = {"Authorization": f"Bearer {SCRAPE_TOKEN}"}
    assert (await _get(url, Origin="https://rebound.example", **scrape))[0] == 403
    assert (await _get(url, Host="rebound.example", **scrape))[0] == 403


# ---------------------------------------------------------------- item 8: JWT time claims and sizes


async def _status_with(running: Any, raw_client: Any, token: str) -> int:
    client: RawClient = raw_client(running.url, token)
    status, _, _ = await client.post(client.request("ping"))
    return status


def _signed(**claims: Any) -> str:
    now = int(time.time())
    return jwt.encode({"tenant": "acme", "sub": "t", "iat": now, "exp": now + 300, **claims}, JWT_SECRET,
                      algorithm="HS256")


@pytest.mark.parametrize(("case", "claims"), [
    ("exp as a numeric string", {"exp": str(int(time.time()) + 300)}),
    ("nbf as a numeric string", {"nbf": str(int(time.time()))}),
    ("iat as a string", {"iat": "yesterday"}),
    ("exp of 10**400", {"exp": 10 ** 400}),
    ("exp beyond the maximum lifetime", {"exp": int(time.time()) + 2 * 86_400}),
    ("an oversize subject", {"sub": "s" * 300}),
    ("an oversize tenant", {"tenant": "t" * 300}),
    ("a thousand scopes", {"scope": " ".join(f"s{i}" for i in range(1000))}),
])
async def test_tokens_with_bad_time_claims_or_oversize_claims_are_401(
        gateway: StartGateway, raw_client: Any, case: str, claims: dict[str, Any]) -> None:
    running = await gateway(make_config([stdio_backend("calc")]))
    assert await _status_with(running, raw_client, _signed(**claims)) == 401, case


async def test_an_oversize_token_is_refused_before_verification(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(make_config([stdio_backend("calc")], auth={"max_token_bytes": 1024}))
    big = _signed(padding="p" * 2000)
    client: RawClient = raw_client(f"{running.url}?token={big}", None)
    status, _, _ = await client.post(client.request("ping"))
    assert status == 401


async def test_a_cached_principal_never_outlives_its_token(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(make_config([stdio_backend("calc")], auth={"jwt": {"secret": JWT_SECRET,
                                                                                "leeway_seconds": 0}}))
    token = _signed(exp=int(time.time()) + 2)
    assert await _status_with(running, raw_client, token) != 401  # verified and cached (400: no session)
    await asyncio.sleep(2.5)
    assert await _status_with(running, raw_client, token) == 401


# ---------------------------------------------------------------- items 6 and 9: a served process


def _requests_total(text: str, outcome: str) -> float:
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == "mcpgw_requests_total" and s.labels.get("outcome") == outcome)


async def _scrape(gateway: Any) -> str:
    async with aiohttp.ClientSession() as http, \
            http.get(gateway.url("/metrics"), headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"}) as response:
        assert response.status == 200
        return await response.text()


async def _abort_mid_body(port: int, session: str) -> None:
    _, writer = await asyncio.open_connection(HOST, port)
    head = "".join(f"{k}: {v}\r\n" for k, v in headers(ATTACKER_KEY, **{"Mcp-Session-Id": session}).items())
    writer.write(f"POST /mcp HTTP/1.1\r\nHost: {HOST}\r\n{head}Content-Length: 5000\r\n\r\n{{\"jsonrpc\":".encode())
    await writer.drain()
    await asyncio.sleep(0.2)
    writer.close()


async def test_bad_input_and_hang_ups_are_client_outcomes_never_errors(served: Any) -> None:
    gateway = await served(metrics={"token": SCRAPE_TOKEN})
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
        session = await initialize(http, gateway.url(), ATTACKER_KEY)
        mcp = headers(ATTACKER_KEY, **{"Mcp-Session-Id": session})
        async with http.post(gateway.url(), data=b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
                             headers={**mcp, "Content-Encoding": "gzip"}) as reply:
            assert reply.status == 400 and (await reply.json())["error"]["code"] == -32700
        async with http.post(gateway.url(), data=gzip.compress(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'),
                             headers={**mcp, "Content-Encoding": "gzip"}) as reply:
            assert reply.status == 200  # real gzip still works
        async with legit_client(gateway.url()) as legit:
            for _ in range(5):
                await _abort_mid_body(gateway.port, session)
            stream = await http.get(gateway.url(), headers={**mcp, "Accept": "text/event-stream"})
            assert stream.status == 200
            stream.close()  # the client closes its GET stream
        legit.check(minimum_calls=2)
    assert await until(lambda: len([e for e in log_lines(gateway, "request") if e["status"] == 499]) >= 6, 5)
    text = await _scrape(gateway)
    assert _requests_total(text, "error") == 0
    assert _requests_total(text, "cancelled") >= 5
    assert _requests_total(text, "bad_request") >= 1
    assert "Traceback" not in gateway.output() and '"level": "error"' not in gateway.output().replace('":"', '": "')


async def test_a_megabyte_method_name_writes_a_short_log_line(served: Any) -> None:
    gateway = await served()
    async with aiohttp.ClientSession() as http:
        session = await initialize(http, gateway.url(), LEGIT_KEY)
        mcp = headers(LEGIT_KEY, **{"Mcp-Session-Id": session})
        note = orjson.dumps({"jsonrpc": "2.0", "method": "x" * 1_000_000})
        for _ in range(20):
            async with http.post(gateway.url(), data=note, headers=mcp) as reply:
                assert reply.status == 202
        request = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "y" * 1_000_000})
        async with http.post(gateway.url(), data=request, headers=mcp) as reply:
            assert (await reply.json())["error"]["code"] == -32601
    assert await until(lambda: len([e for e in log_lines(gateway, "request") if e["method"]
                                    and e["method"][0] in "xy"]) == 21, 5)
    lines = [line for line in gateway.output().splitlines() if '"method"' in line]
    assert max(len(line) for line in lines) < 2 * MAX_LOGGED_CHARS + 1000
    assert len(gateway.output()) < 200_000  # not the 21 MB the names add up to
