"""The parity harness: the official MCP conformance suite, direct and through the gateway, verdict for verdict.

For each requirement set (2025-11-25, 2026-07-28) three legs run, each against its own conformance
fixture process (a dual-era server built on the official SDK, fixture_backend.py), the baseline first
and then both gateway legs at once:
- direct: the fixture alone, the baseline (its scored scenarios all pass);
- unprefixed: through the gateway with the default config (`protocol: auto`, nothing pinned), the
  fixture at `namespace: ""`;
- prefixed: the same with `namespace: conf`, through a proxy that maps the suite's fixed names onto
  the gateway's (`prefix_proxy.py`) and leaves replies as the gateway wrote them.
Every scenario the suite runs for the set (scored or not: the tasks extension's too) is compared
check by check (`LegResult.verdicts`): no check may fail through the gateway that does not fail
directly, so no scenario's verdict differs for the worse, and there is no expected-failures list.
Checks the gateway passes where the fixture fails (it answers `subscriptions/listen` and the tasks
methods' refusals itself) are printed, not failed; so are the informational notes on the gateway's
own transport (it answers lists with JSON where the SDK streams SSE: INFO, "SSE streaming is
optional"). The two SEP-2243 header
scenarios build their requests from the URL's path and drop `?token=`, so they are left out of these
legs and run on their own against a test-only config with `auth.anonymous_tenant`, where the gateway
must pass every check.

The suite cannot send an Authorization header, so it carries the tenant's API key as `?token=`
(a token source the gateway accepts by default).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from backend_fixtures import RunningBackend, start_http_backend
from conformance_suite import LegResult, ensure_installed, lost, run_leg
from conftest import API_KEY, StartGateway, http_backend_config, make_config
from prefix_proxy import PrefixProxy

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.timeout(900)  # the first run installs the suite and Node (npm), then the legs
REVISIONS = ["2025-11-25", "2026-07-28"]
HEADER_SCENARIOS = ("http-header-validation", "http-custom-header-server-validation")
"""Their requests drop the URL's query (the token): run on their own, see the module docstring."""


@pytest.fixture(scope="module")
def conformance() -> Path:
    return ensure_installed()


@pytest.fixture
async def fixture_backend() -> AsyncIterator[RunningBackend]:
    backend = await start_http_backend("conformance-fixture", script=HERE / "fixture_backend.py")
    yield backend
    await backend.stop()


async def fixtures(count: int) -> list[RunningBackend]:
    """One fixture process per leg (the fixture keeps state: subscriptions, toggled tools), started one by one."""
    started: list[RunningBackend] = []
    try:
        for n in range(count):
            started.append(await start_http_backend(f"conformance-fixture-{n}", script=HERE / "fixture_backend.py"))
    except BaseException:
        await asyncio.gather(*(backend.stop() for backend in started))
        raise
    return started


async def gateway_url(gateway: StartGateway, backend: RunningBackend, namespace: str,
                      protocol: str | None = None, **auth: Any) -> str:
    """The gateway in front of the fixture, with the default config but for `protocol` when a test pins it."""
    extra = {"protocol": protocol} if protocol else {}
    config = make_config([http_backend_config("fixture", backend.url, namespace=namespace, **extra)],
                         auth={"token_sources": ["header", "query"], **auth})
    running = await gateway(config)
    return running.url if auth.get("anonymous_tenant") else f"{running.url}?token={API_KEY}"


def assert_clean(result: LegResult, name: str) -> None:
    print(result.report(name))  # the per-leg counts and time, visible with -s and in CI's log on failure
    assert result.returncode == 0, f"{result.report(name)}\n{result.output[-6000:]}"
    assert result.passed > 0, result.output[-2000:]


def regressions(direct: LegResult, through: LegResult) -> dict[str, Any]:
    """The checks that fail through the gateway and not directly, per scenario (the header scenarios apart)."""
    failing = lost(through.verdicts(), direct.verdicts(), "FAILURE")
    return {name: {"failed through the gateway, not directly": checks,
                   "direct": direct.verdicts().get(name), "through the gateway": through.verdicts().get(name)}
            for name, checks in failing.items() if name not in HEADER_SCENARIOS}


@pytest.mark.parametrize("revision", REVISIONS)
async def test_every_scenario_gets_its_direct_verdict_through_the_gateway(
        conformance: Path, gateway: StartGateway, tmp_path: Path, aiohttp_server: Any, revision: str) -> None:
    backends = await fixtures(3)
    try:
        proxy = PrefixProxy(await gateway_url(gateway, backends[2], namespace="conf"), namespace="conf",
                            separator="__")
        prefixed = str((await aiohttp_server(proxy.app())).make_url("/mcp"))
        # The baseline alone first (a starved fixture is no baseline), then both gateway legs at once.
        legs = {"direct": await run_leg(conformance, backends[0].url, revision, tmp_path / "direct")}
        urls = {"unprefixed": await gateway_url(gateway, backends[1], namespace=""), "prefixed": prefixed}
        legs.update(zip(urls, await asyncio.gather(*(run_leg(conformance, url, revision, tmp_path / leg)
                                                     for leg, url in urls.items())), strict=True))
    finally:
        await asyncio.gather(*(backend.stop() for backend in backends))
    assert_clean(legs["direct"], f"{revision} direct")
    for leg in ("unprefixed", "prefixed"):
        print(legs[leg].report(f"{revision} {leg}"))
        assert legs[leg].verdicts(), legs[leg].output[-4000:]
        better = lost(legs["direct"].verdicts(), legs[leg].verdicts(), "FAILURE")
        print(f"{revision} {leg}: checks that fail directly and pass through the gateway: {better or 'none'}")
        worse = regressions(legs["direct"], legs[leg])
        assert worse == {}, f"{leg}: {json.dumps(worse, indent=1)[:8000]}"
    assert proxy.rewritten, "the proxy mapped no name: the prefixed leg proved nothing"
    replies = b"".join(proxy.replies)
    for exposed in (b'"conf__test_simple_text"', b'"conf__test_simple_prompt"', b'"conf+test://static-text"',
                    b'"conf+test://template/123/data"', b'"conf+test://embedded-resource"'):
        assert exposed in replies, f"{exposed!r} never came back: the gateway did not rewrite it"
    leak = re.search(rb'.{200}"(name|uri|uriTemplate)":\s*"test(_|://).{200}', replies, re.S)
    assert leak is None, f"an unprefixed name or URI leaked: {leak and leak.group(0)!r}"


async def test_listen_streams_hear_a_backend_that_can_announce(conformance: Path, fixture_backend: RunningBackend,
                                                              gateway: StartGateway, tmp_path: Path) -> None:
    """The listen checks pass with the fixture reached in a session too: its list changes then come
    on its GET stream (at 2026 it cannot announce them: the gateway re-lists it after the call)."""
    url = await gateway_url(gateway, fixture_backend, namespace="", protocol="handshake")
    result = await run_leg(conformance, url, "2026-07-28", tmp_path, scenarios=["server-stateless"])
    assert_clean(result, "2026-07-28 server-stateless, fixture in a session")
    assert result.failed == 0, result.output[-6000:]


async def test_header_validation_through_the_gateway(conformance: Path, fixture_backend: RunningBackend,
                                                     gateway: StartGateway, tmp_path: Path) -> None:
    """SEP-2243 (Mcp-Method, Mcp-Name, Mcp-Param-* against the body), pending in the 2026-07-28 set.

    These two scenarios build their requests from the URL's path alone and drop `?token=`, so they
    run against a test-only config with `auth.anonymous_tenant`; the default config has none.
    """
    url = await gateway_url(gateway, fixture_backend, namespace="", anonymous_tenant="acme")
    result = await run_leg(conformance, url, "2026-07-28", tmp_path, scenarios=list(HEADER_SCENARIOS))
    assert_clean(result, "2026-07-28 header validation (anonymous tenant)")
    assert result.failed == 0, result.output[-6000:]
