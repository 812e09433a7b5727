"""The official MCP conformance suite, run against the gateway in front of the conformance fixture.

Legs (README, "Tests"):
- both requirement sets against the fixture alone, the baseline: no expected failures at all;
- the 2025-11-25 requirement set, the fixture unprefixed (`namespace: ""`);
- the 2026-07-28 requirement set, the fixture unprefixed;
- both requirement sets with the fixture prefixed (`namespace: conf`), through a proxy that maps
  the suite's fixed names onto the gateway's (`prefix_proxy.py`) and leaves every reply as the
  gateway wrote it (checks that compare a reply with the suite's own unprefixed names are listed
  in `prefixed-leg.<revision>.yml`);
- the SEP-2243 header-validation scenarios at 2026-07-28 (pending in the suite, so unscored there).

The suite cannot send an Authorization header, so it carries the tenant's API key as `?token=`
(a token source the gateway accepts by default). Scenarios that fail only because a feature is
still being built elsewhere are listed in `pending-features.<revision>.yml`, with the reason.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from backend_fixtures import RunningBackend, start_http_backend
from conformance_suite import LegResult, ensure_installed, run_leg
from conftest import API_KEY, StartGateway, http_backend_config, make_config
from prefix_proxy import PrefixProxy

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.timeout(900)  # the first run installs the suite and Node (npm), then three legs


@pytest.fixture(scope="module")
def conformance() -> Path:
    return ensure_installed()


@pytest.fixture
async def fixture_backend() -> AsyncIterator[RunningBackend]:
    backend = await start_http_backend("conformance-fixture", script=HERE / "fixture_backend.py")
    yield backend
    await backend.stop()


def era(revision: str) -> str:
    """The fixture serves both eras: a 2026-07-28 leg reaches it at 2026 (its InputRequiredResults pass
    through, sealed), a 2025-11-25 leg in a handshake session (its questions are relayed live)."""
    return "2026" if revision == "2026-07-28" else "handshake"


async def gateway_url(gateway: StartGateway, backend: RunningBackend, namespace: str, revision: str,
                      protocol: str | None = None, **auth: Any) -> str:
    backends = [http_backend_config("fixture", backend.url, namespace=namespace, protocol=protocol or era(revision))]
    config = make_config(backends,
                         auth={"token_sources": ["header", "query"], **auth})
    running = await gateway(config)
    return running.url if auth.get("anonymous_tenant") else f"{running.url}?token={API_KEY}"


def expected_failures(tmp_path: Path, *names: str) -> Path:
    """One --expected-failures file from the lists in `names` that exist."""
    entries = [entry for name in names if (HERE / name).exists()
               for entry in yaml.safe_load((HERE / name).read_text())["server"]]
    merged = tmp_path / "expected-failures.yml"
    merged.write_text(yaml.safe_dump({"server": entries}))
    return merged


def assert_clean(result: LegResult, name: str) -> None:
    print(result.report(name))  # the per-leg counts and time, visible with -s and in CI's log on failure
    assert result.returncode == 0, f"{result.report(name)}\n{result.output[-6000:]}"
    assert result.passed > 0, result.output[-2000:]


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_the_fixture_meets_the_requirement_set_directly(conformance: Path, fixture_backend: RunningBackend,
                                                              tmp_path: Path, revision: str) -> None:
    """The baseline: without the gateway the fixture passes every scored scenario, with no exceptions."""
    result = await run_leg(conformance, fixture_backend.url, revision, tmp_path)
    assert_clean(result, f"{revision} direct")


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_requirement_set_through_the_gateway(conformance: Path, fixture_backend: RunningBackend,
                                                   gateway: StartGateway, tmp_path: Path, revision: str) -> None:
    url = await gateway_url(gateway, fixture_backend, namespace="", revision=revision)
    result = await run_leg(conformance, url, revision, tmp_path, HERE / f"pending-features.{revision}.yml")
    assert_clean(result, f"{revision} unprefixed")
    # Not scored by the suite (pending upstream), but the gateway passes it: tools/list keeps every
    # JSON Schema 2020-12 keyword of a backend's inputSchema.
    assert "json-schema-2020-12" not in result.failed_scenarios, result.output[-6000:]


async def test_listen_streams_hear_a_backend_that_can_announce(conformance: Path, fixture_backend: RunningBackend,
                                                              gateway: StartGateway, tmp_path: Path) -> None:
    """The listen checks pass with the fixture reached in a session too: its list changes then come
    on its GET stream (at 2026 it cannot announce them: the gateway re-lists it after the call)."""
    url = await gateway_url(gateway, fixture_backend, namespace="", revision="2026-07-28", protocol="handshake")
    result = await run_leg(conformance, url, "2026-07-28", tmp_path, scenarios=["server-stateless"])
    assert_clean(result, "2026-07-28 server-stateless, fixture in a session")
    assert result.failed == 0, result.output[-6000:]


async def test_header_validation_through_the_gateway(conformance: Path, fixture_backend: RunningBackend,
                                                     gateway: StartGateway, tmp_path: Path) -> None:
    """SEP-2243 (Mcp-Method, Mcp-Name, Mcp-Param-* against the body), pending in the 2026-07-28 set.

    These two scenarios build their requests from the URL's path alone and drop `?token=`, so they
    run against a test-only config with `auth.anonymous_tenant`; the default config has none.
    """
    url = await gateway_url(gateway, fixture_backend, namespace="", revision="2026-07-28", anonymous_tenant="acme")
    result = await run_leg(conformance, url, "2026-07-28", tmp_path,
                           scenarios=["http-header-validation", "http-custom-header-server-validation"])
    assert_clean(result, "2026-07-28 header validation (anonymous tenant)")
    assert result.failed == 0, result.output[-6000:]


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_requirement_set_through_the_gateway_prefixed(conformance: Path, fixture_backend: RunningBackend,
                                                           gateway: StartGateway, tmp_path: Path,
                                                           aiohttp_server: Any, revision: str) -> None:
    url = await gateway_url(gateway, fixture_backend, namespace="conf", revision=revision)
    proxy = PrefixProxy(url, namespace="conf", separator="__")
    server = await aiohttp_server(proxy.app())
    result = await run_leg(conformance, f"{server.make_url('/mcp')}", revision, tmp_path / "results",
                           expected_failures(tmp_path, f"pending-features.{revision}.yml",
                                             f"prefixed-leg.{revision}.yml"))
    assert_clean(result, f"{revision} prefixed (conf)")
    assert proxy.rewritten, "the proxy mapped no name: the prefixed leg proved nothing"
    replies = b"".join(proxy.replies)
    for exposed in (b'"conf__test_simple_text"', b'"conf__test_simple_prompt"', b'"conf+test://static-text"',
                    b'"conf+test://template/123/data"', b'"conf+test://embedded-resource"'):
        assert exposed in replies, f"{exposed!r} never came back: the gateway did not rewrite it"
    leak = re.search(rb'.{200}"(name|uri|uriTemplate)":\s*"test(_|://).{200}', replies, re.S)
    assert leak is None, f"an unprefixed name or URI leaked: {leak and leak.group(0)!r}"
