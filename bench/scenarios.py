"""The benchmark scenarios: the same load direct to a backend and through the gateway, interleaved.

Every load series runs `repeat` times; within a repetition the series run one after the
other, in alternating order (A B, then B A, ...) so slow drift of a busy machine hits
both sides alike. Rows report the median of the repetitions (requests and errors: totals).

1. tools/call at concurrency 1: the latency the gateway adds (stub, and the SDK calc backend).
2. tools/call at concurrency 32: throughput through the gateway / direct (stub and calc).
3. tools/list of a 1,000-tool catalogue (10 stubs x 100 tools) from the gateway's cache,
   page_size 1000 (one page) and 100 (ten pages per listing).
4. Catalogue build: process start to /readyz 200 with 1, 10 and 100 stub backends of 100
   tools, and resident memory per 1,000 tools.
5. Scenario 2 with JWT auth (HS256, RS256) and 10 tenants with different views, 10 tokens.
6. Scenario 2 with `--workers 2` and Redis (skipped with a note when unavailable).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import redis

from bench.harness import (
    Backend,
    Gateway,
    JwtKeys,
    StubProcess,
    gateway_config,
    start_calc,
    start_gateway,
    start_stub,
)
from bench.loadgen import ClientProfile, LoadSpec, run_load, sessions_probe
from bench.model import Row, ScenarioResult, Target, ratio
from bench.procs import REPO_ROOT, ProcessSet, StartError, rss_kib

REDIS_URL = "redis://127.0.0.1:6379/0"
PROBE_CONNECTIONS = 8
BASIC_TOOLS = 10
WIDE_BACKENDS, WIDE_TOOLS = 10, 100
LIST_PAGE_SIZES = (1000, 100)


@dataclass(frozen=True, slots=True)
class Sizes:
    """How much load each series sends; `quick` is the smoke-test size."""

    requests: int = 5000  # tools/call runs against the stub (scenarios 1, 2, 5, 6)
    sdk_requests: int = 800  # runs against the SDK backend, several times slower
    list_requests: int = 800  # tools/list runs of 1,000 tools (scenario 3)
    repeat: int = 5
    concurrency: int = 32
    processes: int = 1  # load processes per series (one saturates these targets; raise on big machines)
    catalogue_backends: tuple[int, ...] = (1, 10, 100)
    catalogue_tools: int = 100

    @classmethod
    def quick(cls) -> Sizes:
        return cls(requests=40, sdk_requests=20, list_requests=20, repeat=1, concurrency=4)

    def with_requests(self, requests: int) -> Sizes:
        """`--requests N`: N per stub run; the slower kinds of run get a proportional share."""
        return replace(self, requests=requests, sdk_requests=max(requests // 6, 10),
                       list_requests=max(requests // 6, 10))


@dataclass
class RunContext:
    """What scenarios share: the processes, the sizes, and environments started once, lazily."""

    procs: ProcessSet
    sizes: Sizes
    say: Callable[[str], None] = print
    _cache: dict[str, Any] = field(default_factory=dict)

    def cached(self, key: str, make: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def basic_stub(self) -> StubProcess:
        return self.cached("basic_stub", lambda: start_stub(self.procs, tools=BASIC_TOOLS, name="stub"))

    def wide_stub(self) -> StubProcess:
        return self.cached("wide_stub", lambda: start_stub(self.procs, tools=WIDE_TOOLS, count=WIDE_BACKENDS,
                                                           name="s"))

    def calc(self) -> Backend | str:
        """The SDK calc backend, or why it would not start (the `mcp` package is an optional extra)."""
        return self.cached("calc", self._start_calc)

    def _start_calc(self) -> Backend | str:
        try:
            return start_calc(self.procs)
        except StartError as exc:
            return f"the SDK calc backend did not start: {str(exc).splitlines()[0]}"

    def keys(self) -> JwtKeys:
        return self.cached("keys", lambda: JwtKeys.generate(self.procs.workdir))

    def drop_gateway(self, key: str) -> None:
        gateway = self._cache.pop(f"gateway:{key}", None)
        if gateway is not None:
            self.procs.stop(gateway.managed)

    def gateway(self, key: str, raw: dict[str, Any], **options: Any) -> Gateway:
        return self.cached(f"gateway:{key}", lambda: start_gateway(self.procs, raw, name=f"gateway-{key}", **options))


def interleave(series: dict[str, Callable[[], dict[str, Any]]], repeat: int) -> list[Row]:
    """Run each series `repeat` times, alternating the order each repetition."""
    labels = list(series)
    samples: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    for rep in range(repeat):
        for label in labels if rep % 2 == 0 else labels[::-1]:
            samples[label].append(series[label]())
    return [Row.from_samples(label, samples[label]) for label in labels]


def load(spec: LoadSpec) -> Callable[[], dict[str, Any]]:
    return lambda: run_load(spec).summary()


def echo_profile(backend: Backend, *, via_gateway: bool, token: str | None = None) -> ClientProfile:
    """Call a backend's first three tools in turn (so the gateway's lookups are not all one key)."""
    tools = backend.tools[:3]
    return ClientProfile(token, tuple(backend.exposed(t) for t in tools) if via_gateway else tools)


# ---------------------------------------------------------------- 1 and 2: tools/call


def _call_backends(ctx: RunContext) -> list[tuple[str, Backend | str, str, int]]:
    """(variant, backend or why it is missing, op, requests): the stub, then the SDK calc backend."""
    stub = ctx.basic_stub().backends[0]
    calc = ctx.calc()
    return [("stub", stub, "echo", ctx.sizes.requests), ("calc", calc, "add", ctx.sizes.sdk_requests)]


def _basic_gateway(ctx: RunContext) -> Gateway:
    calc = ctx.calc()
    backends = [ctx.basic_stub().backends[0], *([calc] if isinstance(calc, Backend) else [])]
    return ctx.gateway("basic", gateway_config(backends))


def _call_rows(ctx: RunContext, backend: Backend, op: str, requests: int, concurrency: int) -> list[Row]:
    gateway = _basic_gateway(ctx)

    def spec(url: str, via_gateway: bool) -> LoadSpec:
        return LoadSpec(url=url, op=op, requests=requests, concurrency=concurrency,
                        processes=ctx.sizes.processes if concurrency > 1 else 1,
                        profiles=(echo_profile(backend, via_gateway=via_gateway),))

    return interleave({"direct": load(spec(backend.url, False)), "gateway": load(spec(gateway.url, True))},
                      ctx.sizes.repeat)


def _call_scenario(ctx: RunContext, number: str, concurrency: int, title: str,
                   judge: Callable[[ScenarioResult, str], None]) -> list[ScenarioResult]:
    """One result per backend kind: the same calls direct and through the gateway, then `judge` them."""
    results = []
    for variant, backend, op, requests in _call_backends(ctx):
        result = ScenarioResult(f"{number}-{variant}", title.format(variant=variant))
        if isinstance(backend, str):
            result.skipped = backend
        else:
            result.rows = _call_rows(ctx, backend, op, requests, concurrency)
            judge(result, variant)
        results.append(result)
    return results


def scenario_1(ctx: RunContext) -> list[ScenarioResult]:
    return _call_scenario(ctx, "1", 1, "tools/call, concurrency 1, {variant} backend: added latency", _judge_latency)


def _judge_latency(result: ScenarioResult, variant: str) -> None:
    direct, gateway = result.row("direct"), result.row("gateway")
    result.metrics = {"added_p50_ms": gateway.get("p50_ms") - direct.get("p50_ms"),
                      "added_p99_ms": gateway.get("p99_ms") - direct.get("p99_ms")}
    if variant == "stub":  # the SDK backend's own jitter would hide the gateway's share
        result.targets = [Target("gateway adds at p50", result.metrics["added_p50_ms"], 0.5, "<=", " ms"),
                          Target("gateway adds at p99", result.metrics["added_p99_ms"], 2.0, "<=", " ms")]


def scenario_2(ctx: RunContext) -> list[ScenarioResult]:
    concurrency = ctx.sizes.concurrency
    return _call_scenario(ctx, "2", concurrency, f"tools/call, concurrency {concurrency}, {{variant}} backend: "
                          "throughput", _judge_throughput)


def _judge_throughput(result: ScenarioResult, variant: str) -> None:
    result.metrics = {"throughput_ratio": ratio(result.row("gateway").get("rps"), result.row("direct").get("rps"))}
    if variant == "stub":
        result.targets = [Target("gateway throughput / direct", result.metrics["throughput_ratio"], 0.5, ">=")]


# ---------------------------------------------------------------- 3: tools/list from the cache


def scenario_3(ctx: RunContext) -> list[ScenarioResult]:
    wide = ctx.wide_stub().backends
    exposed = frozenset(b.exposed(t) for b in wide for t in b.tools)
    total = len(exposed)
    results = []
    for page_size in LIST_PAGE_SIZES:
        stub = start_stub(ctx.procs, tools=total, page_size=0 if page_size >= total else page_size, name="stub1000")
        gateway = ctx.gateway(f"list{page_size}", gateway_config(list(wide), page_size=page_size))
        result = ScenarioResult(f"3-page{page_size}",
                                f"tools/list of {total} tools from the cache, page_size {page_size}"
                                f" ({-(-total // page_size)} request(s) per listing)")
        result.rows = _list_rows(ctx, stub.backends[0], gateway, exposed)
        _list_metrics(result, ctx.sizes.concurrency, page_size == max(LIST_PAGE_SIZES))
        ctx.procs.stop(stub.managed)
        ctx.drop_gateway(f"list{page_size}")  # its memory would blur scenario 4's
        results.append(result)
    return results


def _list_rows(ctx: RunContext, direct: Backend, gateway: Gateway, exposed: frozenset[str]) -> list[Row]:
    series = {}
    for concurrency in (1, ctx.sizes.concurrency):
        common = {"op": "list", "requests": ctx.sizes.list_requests, "concurrency": concurrency,
                  "processes": ctx.sizes.processes if concurrency > 1 else 1}
        series[f"direct c{concurrency}"] = load(LoadSpec(url=direct.url, expect_tools=frozenset(direct.tools),
                                                         **common))
        series[f"gateway c{concurrency}"] = load(LoadSpec(url=gateway.url, expect_tools=exposed, **common))
    return interleave(series, ctx.sizes.repeat)


def _list_metrics(result: ScenarioResult, concurrency: int, with_targets: bool) -> None:
    c1, cn = result.row("gateway c1"), result.row(f"gateway c{concurrency}")
    result.metrics = {"gateway_rps": cn.get("rps"), "gateway_p50_ms_c1": c1.get("p50_ms"),
                      "throughput_ratio": ratio(cn.get("rps"), result.row(f"direct c{concurrency}").get("rps"))}
    result.notes.append("rps: listings per second at the higher concurrency; p50 at concurrency 1. "
                        "Direct: one stub serving the same number of tools, with the same paging.")
    if with_targets:
        result.targets = [Target("tools/list rps", cn.get("rps"), 2000, ">="),
                          Target("tools/list p50", c1.get("p50_ms"), 2.0, "<=", " ms")]


# ---------------------------------------------------------------- 4: catalogue build and memory


def scenario_4(ctx: RunContext) -> list[ScenarioResult]:
    sizes = ctx.sizes
    tools = sizes.catalogue_tools
    stub = start_stub(ctx.procs, tools=tools, count=max(sizes.catalogue_backends), name="c")
    counts = (0, *sizes.catalogue_backends)
    series = {f"{n} backends": _catalogue_probe(ctx, list(stub.backends[:n])) for n in counts}
    result = ScenarioResult("4", f"catalogue build: start to /readyz 200, and memory ({tools} tools per backend)")
    result.rows = interleave(series, sizes.repeat)
    ctx.procs.stop(stub.managed)
    largest = max(counts)
    extra_kib = result.row(f"{largest} backends").get("rss_listed_kib") - result.row("0 backends").get("rss_listed_kib")
    result.metrics = {f"ready_s_{n}": row.get("ready_s") for n, row in zip(counts, result.rows, strict=True)}
    result.metrics["mib_per_1000_tools"] = extra_kib / 1024 / (largest * tools / 1000) if largest else 0.0
    result.targets = [
        Target("100 backends ready", result.metrics.get("ready_s_100"), 2.0, "<=", " s"),
        Target("memory per 1,000 tools", result.metrics["mib_per_1000_tools"], 2.0, "<=", " MiB"),
    ]
    result.notes.append("ready_s: from spawning `python -m gateway serve` (interpreter start and imports "
                        "included) to the first /readyz 200. rss_ready: VmRSS then; rss_listed: after one "
                        "full tools/list (the tenant view built). Memory per 1,000 tools uses rss_listed "
                        f"({largest} backends minus 0 backends).")
    return [result]


def _catalogue_probe(ctx: RunContext, backends: list[Backend]) -> Callable[[], dict[str, Any]]:
    def probe() -> dict[str, Any]:
        gateway = start_gateway(ctx.procs, gateway_config(backends, page_size=1000), name=f"gateway-c{len(backends)}")
        try:
            rss_ready = rss_kib(gateway.managed.pid)
            exposed = frozenset(b.exposed(t) for b in backends for t in b.tools)
            listed = run_load(LoadSpec(url=gateway.url, op="list", requests=1, concurrency=1, warmup=0,
                                       expect_tools=exposed))
            return {"ready_s": gateway.ready_seconds, "rss_ready_kib": rss_ready,
                    "rss_listed_kib": rss_kib(gateway.managed.pid), "tools": len(exposed),
                    "requests": listed.requests, "errors": listed.errors,
                    "error_samples": listed.error_samples}
        finally:
            ctx.procs.stop(gateway.managed)

    return probe


# ---------------------------------------------------------------- 5: JWT auth and 10 tenants


def tenant_views(backends: tuple[Backend, ...]) -> dict[str, Any]:
    """Tenant t<i> sees backends i and i+1 (by allow globs), so each of the 10 views differs."""
    count = len(backends)
    return {f"t{i}": {"backends": ["*"],
                      "tools": {"allow": [f"{backends[i].name}__*", f"{backends[(i + 1) % count].name}__*"]}}
            for i in range(count)}


def scenario_5(ctx: RunContext) -> list[ScenarioResult]:
    wide = ctx.wide_stub().backends
    keys = ctx.keys()
    tenants = tenant_views(wide)
    result = ScenarioResult("5", f"tools/call, concurrency {ctx.sizes.concurrency}, JWT auth, "
                                 f"{len(tenants)} tenants with different views, {len(tenants)} tokens")
    series = {"direct": load(_spec(ctx, wide[0].url, (echo_profile(wide[0], via_gateway=False),)))}
    anonymous = ctx.gateway("noauth", gateway_config(list(wide)))
    series["gateway no auth"] = load(_spec(ctx, anonymous.url, _tenant_profiles(wide, None)))
    for algorithm in ("HS256", "RS256"):
        gateway = ctx.gateway(algorithm, gateway_config(list(wide), tenants=tenants,
                                                        auth=keys.auth_config(algorithm)))
        tokens = [keys.token(algorithm, tenant, f"bench-{tenant}") for tenant in tenants]
        series[f"gateway {algorithm}"] = load(_spec(ctx, gateway.url, _tenant_profiles(wide, tokens)))
    result.rows = interleave(series, ctx.sizes.repeat)
    base = result.row("gateway no auth").get("rps")
    for algorithm in ("HS256", "RS256"):
        cost = 1 - ratio(result.row(f"gateway {algorithm}").get("rps"), base)
        result.metrics[f"auth_cost_{algorithm}"] = cost
        result.targets.append(Target(f"{algorithm} auth cost (throughput lost vs no auth)", cost, 0.10, "<="))
    result.notes.append("No auth: tokens off (an anonymous tenant that sees every tool); the VUs call the same "
                        "tools as with auth. VU i uses tenant t<i mod 10>'s token and calls its backend-i tools.")
    return [result]


def _tenant_profiles(wide: tuple[Backend, ...], tokens: list[str] | None) -> tuple[ClientProfile, ...]:
    return tuple(echo_profile(backend, via_gateway=True, token=tokens[i] if tokens else None)
                 for i, backend in enumerate(wide))


def _spec(ctx: RunContext, url: str, profiles: tuple[ClientProfile, ...]) -> LoadSpec:
    return LoadSpec(url=url, op="echo", requests=ctx.sizes.requests, concurrency=ctx.sizes.concurrency,
                    processes=ctx.sizes.processes, profiles=profiles)


# ---------------------------------------------------------------- 6: workers and Redis


def scenario_6(ctx: RunContext) -> list[ScenarioResult]:
    result = ScenarioResult("6", f"tools/call, concurrency {ctx.sizes.concurrency}, --workers 2 with Redis")
    result.skipped = _workers_unavailable()
    if result.skipped:
        return [result]
    prefix = f"mcpgw-bench-{secrets.token_hex(4)}:"  # ours alone, so we can count and delete our keys
    try:
        _workers_rows(ctx, result, {"redis_url": REDIS_URL, "key_prefix": prefix})
    finally:
        result.notes.append(redis_keys_note(prefix))
    two_rps = result.row("gateway 2 workers").get("rps")
    result.metrics = {"throughput_ratio": ratio(two_rps, result.row("direct").get("rps")),
                      "workers_speedup": ratio(two_rps, result.row("gateway 1 worker").get("rps"))}
    result.targets = [Target("2 workers: gateway throughput / direct (scenario 2's target)",
                             result.metrics["throughput_ratio"], 0.5, ">=")]
    return [result]


def _workers_rows(ctx: RunContext, result: ScenarioResult, store: dict[str, Any]) -> None:
    stub = ctx.basic_stub().backends[0]
    one = ctx.gateway("redis1", gateway_config([stub], store=store))
    two = ctx.gateway("redis2", gateway_config([stub], store=store), workers=2)
    profiles = (echo_profile(stub, via_gateway=True),)
    result.rows = interleave({
        "direct": load(_spec(ctx, stub.url, (echo_profile(stub, via_gateway=False),))),
        "gateway 1 worker": load(_spec(ctx, one.url, profiles)),
        "gateway 2 workers": load(_spec(ctx, two.url, profiles)),
    }, ctx.sizes.repeat)
    result.notes.append("Each VU keeps one connection, so its session stays on the worker that created it. "
                        f"Both workers share the machine's {os.cpu_count()} cores with the load and the stub.")
    result.notes.extend(_shared_session_note(ctx, two))


def _workers_unavailable() -> str | None:
    """Why scenario 6 cannot run here (None: it can)."""
    help_text = subprocess.run([sys.executable, "-m", "gateway", "serve", "--help"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=30).stdout
    if "--workers" not in help_text:
        return "`--workers` is not implemented in gateway/server.py yet"
    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=1, socket_connect_timeout=1).ping()
    except Exception as exc:
        return f"Redis is not reachable at {REDIS_URL} ({type(exc).__name__})"
    return None


def _shared_session_note(ctx: RunContext, gateway: Gateway) -> list[str]:
    """Whether a session made on one connection works on fresh ones (i.e. on the other worker too)."""
    spec = LoadSpec(url=gateway.url, op="echo", requests=1, concurrency=1, warmup=0,
                    profiles=(echo_profile(ctx.basic_stub().backends[0], via_gateway=True),))
    try:
        probe = sessions_probe(spec, PROBE_CONNECTIONS)
    except Exception as exc:
        return [f"session-sharing probe failed: {type(exc).__name__}: {exc}"]
    if probe.errors:
        return [f"sessions are NOT shared across workers: {probe.errors}/{PROBE_CONNECTIONS} calls on new "
                f"connections failed (first: {probe.error_samples[0]}); clients without sticky connections break"]
    return [f"sessions are shared across workers ({PROBE_CONNECTIONS}/{PROBE_CONNECTIONS} calls on new "
            "connections succeeded)"]


def redis_keys_note(prefix: str) -> str:
    """How many keys the gateways wrote under our prefix (then delete them)."""
    try:
        client = redis.Redis.from_url(REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    except Exception as exc:
        return f"could not inspect Redis: {type(exc).__name__}"
    if not keys:
        return (f"Redis held no keys under {prefix!r} after the run: with store.redis_url set, the gateway "
                "still kept sessions, catalogue and rate limits out of Redis")
    return f"the gateways wrote {len(keys)} Redis keys under {prefix!r} (deleted after the run)"


SCENARIOS: dict[str, Callable[[RunContext], list[ScenarioResult]]] = {
    "1": scenario_1, "2": scenario_2, "3": scenario_3, "4": scenario_4, "5": scenario_5, "6": scenario_6,
}


def run_scenario(ctx: RunContext, key: str) -> list[ScenarioResult]:
    """One scenario; a broken harness (a process that will not start) is reported, and the run goes on."""
    try:
        return SCENARIOS[key](ctx)
    except StartError as exc:
        return [ScenarioResult(key, f"scenario {key}", failed=str(exc))]
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return [ScenarioResult(key, f"scenario {key}",
                               failed=f"{type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})")]

