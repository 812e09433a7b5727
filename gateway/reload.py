"""Live reload: `SIGHUP` or `POST /admin/reload` re-reads the config and swaps it in, or says why not.

One reload at a time (a lock). The new config is read with the start-up loader (file, `${VAR}`,
`MCPGW_` overrides, the CLI's --host/--port, the start-up checks), then:

1. settings that only a restart can change (`RESTART_ONLY`) must be unchanged, or the reload is
   rejected naming them: the file then says what the process will do after its next restart,
   never something it silently does not do now;
2. new backends, and backends whose config differs in any way, get new upstreams, started and
   listed beside the old ones while those keep serving;
3. the swap, with no await in it: the pool's mapping, the dispatcher, the authenticator, the
   tenants and the catalogue are replaced together, so the next request sees the new config
   whole and a request under way finishes on the parts it already holds;
4. clients whose tenant's view changed get `notifications/*/list_changed`; upstreams that left
   the pool (removed or replaced backends) finish their calls in flight, then stop.

Sessions, GET streams, listen streams, resource subscriptions, rate-limit buckets and in-flight
registries are not part of the config: they are kept as they are (subscriptions follow the backends:
see gateway/dispatch/subscriptions.py). A rejected reload changes nothing and gives its reason in one line.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web

from gateway.admin import require_admin
from gateway.auth.authenticator import Authenticator
from gateway.catalogue.merge import BackendSnapshot
from gateway.catalogue.servers import server_changes
from gateway.catalogue.views import policy_changes
from gateway.components import Components, build_front
from gateway.config import Config, ConfigError
from gateway.config.version import config_version
from gateway.store.reloads import ReloadLog
from gateway.tenancy import Principal
from gateway.transport.exchange import Deliver, Exchange
from gateway.transport.requestlog import PRINCIPAL
from gateway.upstream.routed import RoutedUpstream

if TYPE_CHECKING:
    from gateway.audit import AuditTrail
    from gateway.metrics import Metrics

log = structlog.get_logger("gateway.reload")

ConfigSource = Callable[[], Config]
"""Reads the config as at start-up; raises ConfigError naming what is wrong."""

RESTART_ONLY = ("server", "store", "upstream", "admin", "metrics", "logging",
                "auth.token_sources", "auth.query_param", "auth.resource_metadata", "mrtr", "tracing")
"""Settings bound at start (the socket, the store, routes, the log pipeline, the rounds that hold
calls under way and their state key, the span exporter): a reload that changes one is rejected. Everything else
(backends, tenants, limits, catalogue, the other auth keys) is live."""

INVALID, CONFLICT = 422, 409
"""A config that does not load or check; one that changes RESTART_ONLY settings (or cannot be re-read)."""

DRAIN_POLL_SECONDS = 0.05
"""How often a retired upstream is asked whether its last call has finished."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a reload did: applied with its changes, or rejected with one line of reason."""

    applied: bool
    reason: str | None = None
    status: int = 200  # of the reply to POST /admin/reload
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    tenants: tuple[str, ...] = ()  # tenants added, removed or changed
    changed: tuple[str, ...] = ()  # every key path whose value differs (never the values)
    version: str | None = None  # the config version in force after it

    def json(self) -> dict[str, Any]:
        if not self.applied:
            return {"status": "rejected", "reason": self.reason}
        return {"status": "applied", "backends": {"added": list(self.added), "removed": list(self.removed),
                                                  "replaced": list(self.replaced)},
                "tenants_changed": list(self.tenants), "changed": list(self.changed), "config_version": self.version}


@dataclass(frozen=True, slots=True)
class BackendPlan:
    """How the backends of two configs differ, by name."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    replaced: tuple[str, ...]  # in both, with any difference in their config

    @classmethod
    def between(cls, old: Config, new: Config) -> BackendPlan:
        before = {b.name: b for b in old.backends}
        after = {b.name: b for b in new.backends}
        return cls(added=tuple(n for n in after if n not in before),
                   removed=tuple(n for n in before if n not in after),
                   replaced=tuple(n for n in after if n in before and before[n] != after[n]))

    @property
    def fresh(self) -> tuple[str, ...]:
        """The backends that get a new upstream."""
        return self.added + self.replaced


def restart_only_changes(old: Config, new: Config) -> list[str]:
    """The keys under RESTART_ONLY whose values differ between two configs, e.g. `server.port`."""
    return [key for path in RESTART_ONLY for key in _differences(_at(old, path), _at(new, path), path)]


def _at(config: Config, path: str) -> Any:
    value: Any = config
    for part in path.split("."):
        value = getattr(value, part)
    return value


def _differences(old: Any, new: Any, path: str) -> list[str]:
    if old == new:
        return []
    if is_dataclass(old) and type(old) is type(new):
        return [key for f in fields(old) for key in _differences(getattr(old, f.name), getattr(new, f.name),
                                                                  f"{path}.{f.name}")]
    return [path]


def changed_tenants(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(sorted(n for n in {*old, *new} if old.get(n) != new.get(n)))


def changed_keys(old: Config, new: Config) -> tuple[str, ...]:
    """Every key path whose value differs, down to a backend's or a tenant's own keys (a backend or
    tenant added or removed is named whole): what the status page's reload history shows."""
    keys = [key for f in fields(Config) if f.name not in ("backends", "tenants")
            for key in _differences(getattr(old, f.name), getattr(new, f.name), f.name)]
    for kind, before, after in (("backends", {b.name: b for b in old.backends}, {b.name: b for b in new.backends}),
                                ("tenants", old.tenants, new.tenants)):
        for name in [*before, *(n for n in after if n not in before)]:
            keys += _differences(before.get(name), after.get(name), f"{kind}.{name}")
    return tuple(keys)


class StartFailed(Exception):
    """The new backends could not be set up beside the old ones (the old config goes on)."""


class Reloader:
    """Applies new configs to a running core (see the module docstring)."""

    def __init__(self, *, config: Config, core: Components, exchange: Exchange, source: ConfigSource | None,
                 deliver: Deliver, metrics: Metrics | None = None, on_swap: Callable[[], None] = lambda: None,
                 history: ReloadLog | None = None, audit: AuditTrail | None = None) -> None:
        self.config = config
        self.audit = audit  # every reload, applied or not, gets an audit record (auditing on)
        self.version = config_version(config)
        self.history = history if history is not None else ReloadLog()  # every outcome, for the status page
        self.core = core
        self.exchange = exchange
        self.source = source
        self.deliver = deliver  # list_changed to the sessions of these tenants
        self.metrics = metrics
        self.on_swap = on_swap  # the transport re-reads the exchange's parts
        self._lock = asyncio.Lock()
        self._retiring: set[asyncio.Task[None]] = set()
        self._tasks: set[asyncio.Task[Outcome]] = set()
        self.retired: set[RoutedUpstream] = set()  # draining: a forced exit kills their children too

    def loaded(self) -> None:
        """The config in force at start joins the history (what later reloads are compared with)."""
        self.history.record({"at": time.time(), "trigger": "start", "by": None, "status": "applied",
                             "config_version": {"before": None, "after": self.version}})

    async def reload(self, trigger: str, by: Principal | None = None) -> Outcome:
        """Read, check and apply the config; concurrent calls run one after the other (each in its span).
        `by`: the admin who asked (None for a signal), for the history."""
        tracing = self.core.tracing
        if tracing is None:
            return await self._recorded(trigger, by)
        with tracing.internal("mcpgw reload", {"mcpgw.reload.trigger": trigger}) as span:
            outcome = await self._recorded(trigger, by)
            span.note("mcpgw.reload.outcome", "applied" if outcome.applied else "rejected")
            if not outcome.applied:
                span.fail("rejected", outcome.reason)
            return outcome

    async def _recorded(self, trigger: str, by: Principal | None) -> Outcome:
        """One reload at a time; each outcome, applied or not, joins the history."""
        async with self._lock:
            at, started, before = time.time(), time.monotonic(), self.version
            outcome = await self._reload(trigger)
            self.history.record({
                "at": at, "trigger": trigger, "by": {"tenant": by.tenant, "subject": by.subject} if by else None,
                **outcome.json(), "config_version": {"before": before, "after": self.version},
                "duration_ms": round((time.monotonic() - started) * 1000, 1)})
            if self.audit is not None:  # key paths and versions only: a rejection's reason may quote a value
                await self.audit.admin("admin/reload", tenant=by.tenant if by else None,
                                       subject=by.subject if by else None, request_id=None,
                                       outcome="applied" if outcome.applied else "rejected",
                                       detail={"trigger": trigger, "changed": list(outcome.changed),
                                               "config_version": {"before": before, "after": self.version}})
            return outcome

    async def _reload(self, trigger: str) -> Outcome:
        started = time.monotonic()
        if self.source is None:
            return self._rejected(trigger, "this gateway was not started from a config it can read again",
                                  CONFLICT)
        try:
            new = await asyncio.to_thread(self.source)
        except ConfigError as exc:
            return self._rejected(trigger, str(exc), INVALID)
        frozen = restart_only_changes(self.config, new)
        if frozen:
            return self._rejected(trigger, f"{', '.join(frozen)}: cannot change without a restart", CONFLICT)
        try:
            outcome = await self._apply(new)
        except StartFailed as exc:
            return self._rejected(trigger, str(exc), INVALID)
        log.info("config_reloaded", trigger=trigger, duration_ms=round((time.monotonic() - started) * 1000, 1),
                 **{k: v for k, v in outcome.json().items() if k != "status"})
        self._count(applied=True)
        return outcome

    def start(self, trigger: str, by: Principal | None = None) -> asyncio.Task[Outcome]:
        """`reload` as a task of its own: a signal handler cannot await, and an admin whose
        connection drops must not cut a reload short halfway."""
        task = asyncio.create_task(self.reload(trigger, by), name=f"reload-{trigger}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self) -> None:
        """At shutdown: stop the upstreams still draining."""
        tasks = [*self._tasks, *self._retiring]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*self._retiring, return_exceptions=True)  # retired while a reload was cancelled

    def _rejected(self, trigger: str, reason: str, status: int) -> Outcome:
        reason = " ".join(reason.split())  # one line, whatever the loader said
        log.error("config_reload_rejected", trigger=trigger, reason=reason)
        self._count(applied=False)
        return Outcome(applied=False, reason=reason, status=status)

    def _count(self, *, applied: bool) -> None:
        if self.metrics is not None:
            self.metrics.config_reloaded(applied)

    async def _apply(self, new: Config) -> Outcome:
        plan = BackendPlan.between(self.config, new)
        upstreams, snapshots = await self._prepare(new, plan.fresh)
        old_config, old_catalogue, old_auth = self.config, self.core.catalogue.current, self.core.authenticator
        retired = [(self.core.pool.get(name), _backend(old_config, name).call_cap_seconds)
                   for name in plan.removed + plan.replaced]
        self._swap(new, upstreams)
        before, after = self.core.catalogue.reconfigure(new, snapshots)  # no await since the swap
        self._retire(retired, old_auth)  # before any await: whatever happens next, they stop
        searches = (old_config.catalogue.search, new.catalogue.search)
        for method, audience in policy_changes(old_catalogue, after, old_config.tenants, new.tenants,
                                               searches).items():
            self.deliver(audience.tenants, {"jsonrpc": "2.0", "method": method}, audience.sees)
        for method, tenants in server_changes(old_config.servers, new.servers, new.tenants).items():
            self.deliver(tenants, {"jsonrpc": "2.0", "method": method})  # a virtual server's list changed
        self.core.catalogue.servers.check(after)  # its items withdrawn by the new config, logged and counted
        await self.core.catalogue.announce(before, after, snapshots)
        return Outcome(applied=True, added=plan.added, removed=plan.removed, replaced=plan.replaced,
                       tenants=changed_tenants(old_config.tenants, new.tenants),
                       changed=changed_keys(old_config, new), version=self.version)

    async def _prepare(self, new: Config, names: Sequence[str]) -> tuple[dict[str, RoutedUpstream],
                                                                       dict[str, BackendSnapshot]]:
        """New upstreams for `names`, started and listed while the old config keeps serving."""
        upstreams = {name: self.core.pool.build(_backend(new, name)) for name in names}
        try:
            await asyncio.gather(*(upstream.start() for upstream in upstreams.values()))
            listed = await asyncio.gather(*(self.core.catalogue.prefetch(_backend(new, name), upstream)
                                            for name, upstream in upstreams.items()))
        except Exception as exc:  # a dead backend does not raise (it is listed down): this is unexpected
            log.exception("reload_start_failed")
            await asyncio.gather(*(upstream.close() for upstream in upstreams.values()), return_exceptions=True)
            raise StartFailed(f"starting the new backends failed: {exc!r}") from exc
        except BaseException:  # cancelled (shutdown): nothing of the new config may outlive it
            await asyncio.gather(*(upstream.close() for upstream in upstreams.values()), return_exceptions=True)
            raise
        return upstreams, dict(zip(upstreams, listed, strict=True))

    def _swap(self, new: Config, upstreams: Mapping[str, RoutedUpstream]) -> None:
        """Everything a request reads, replaced with no await in between."""
        core = self.core
        core.pool.swap({b.name: upstreams.get(b.name) or core.pool.get(b.name) for b in new.backends})
        core.credentials.rebind(new)
        core.dispatcher, core.authenticator = build_front(new, catalogue=core.catalogue, pool=core.pool,
                                                          list_changed=True, metrics=self.metrics,
                                                          kept=core.dispatcher, tracing=core.tracing,
                                                          credentials=core.credentials)
        self.exchange.rebind(dispatcher=core.dispatcher, authenticator=core.authenticator, tenants=new.tenants)
        if self.metrics is not None:
            self.metrics.reconfigure(new)
        self.config, self.version = new, config_version(new)
        self.on_swap()

    def _retire(self, upstreams: list[tuple[RoutedUpstream, float]], authenticator: Authenticator) -> None:
        task = asyncio.create_task(_drain_and_close(upstreams, authenticator), name="reload-retire")
        self._retiring.add(task)
        self.retired.update(upstream for upstream, _ in upstreams)

        def done(_: asyncio.Task[None]) -> None:
            self._retiring.discard(task)
            self.retired.difference_update(upstream for upstream, _ in upstreams)

        task.add_done_callback(done)


async def _drain_and_close(upstreams: list[tuple[RoutedUpstream, float]], authenticator: Authenticator) -> None:
    """Each retired upstream stops once its calls in flight are done, or at its calls' hard cap."""
    await asyncio.gather(*(_drain(upstream, cap) for upstream, cap in upstreams), return_exceptions=True)
    await authenticator.close()


async def _drain(upstream: RoutedUpstream, cap: float) -> None:
    deadline = time.monotonic() + cap
    try:
        while upstream.busy and time.monotonic() < deadline:  # noqa: ASYNC110 - no event marks the last call's end
            await asyncio.sleep(DRAIN_POLL_SECONDS)
        log.info("backend_retired", backend=upstream.name, in_flight=upstream.busy)
    finally:
        await upstream.close()


def _backend(config: Config, name: str) -> Any:
    backend = config.backend(name)
    assert backend is not None  # names come from this config's own backends
    return backend


# ---------------------------------------------------------------- the endpoint and the signal

RELOADER = web.AppKey("reloader", Reloader)


async def reload_endpoint(request: web.Request) -> web.Response:
    """POST /admin/reload (admin scope): 200 with what changed, or 409 with the reason it was rejected."""
    await require_admin(request)
    outcome = await asyncio.shield(request.app[RELOADER].start("admin", request[PRINCIPAL]))
    return web.json_response(outcome.json(), status=outcome.status)
