"""Choosing and running the shared-state parts: in-process memory, or Redis for many replicas.

With `store.redis_url` unset, every part is the in-process memory one. With it set, one
Redis client (one connection pool) per process serves the catalogue snapshots, the
sessions, the rate-limit counters and the event channel, and four background tasks run:
the health watchdog (PING), the event subscriber, the session expiry pusher, and the
heartbeat telling the other replicas which tenants listen for list changes here. The status page's
reload log and replica heartbeats (store/reloads.py, store/replicas.py) use the same client.

The event channel also carries what must reach one replica in particular: a session's answer
to the replica that asked, a multi-round retry to the replica holding its round. The key that
seals `requestState` is `mrtr.secret`, or else one every replica shares in Redis (made by the
first to start), or else, with no Redis, one of this process's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway.catalogue.store import MemorySnapshotStore, RedisSnapshotStore, SnapshotStore
from gateway.config import Config, RateLimitConfig
from gateway.oauth.store import MemoryStore, RedisStore, SecretStore
from gateway.protocol.request_state import StateSeal
from gateway.ratelimit import Decision, MemoryRateLimiter, RateLimiter, RedisRateLimiter
from gateway.store.client import create_client
from gateway.store.events import EventBus
from gateway.store.health import StoreHealth, StoreUnavailable, cancel_quietly, close_quietly, redacted
from gateway.store.listening import SharedListening
from gateway.store.reloads import ReloadLog
from gateway.store.replicas import Replicas
from gateway.transport.channel import ForwardAnswer, PendingAsks
from gateway.transport.http.streams import StreamHub
from gateway.transport.rounds import Rounds
from gateway.transport.rounds_remote import RemoteRounds
from gateway.transport.sessions import MemorySessionStore, RedisSessionStore, SessionStore

if TYPE_CHECKING:
    from gateway.metrics import Metrics

SUBSCRIBE_WAIT_SECONDS = 1.0
"""At start, how long to wait for the event subscription, so no event is missed from the first request."""

CLIENT_ANSWER_EVENT = "client_answer"
"""Event kind: a client's answer to a gateway request (fields: session, message), for the replica that asked."""

RELOADS_KEY, REPLICAS_KEY = "reloads", "replicas"
"""Under the key prefix: the reload log every replica shares, and the hash of the replicas' heartbeats."""

ROUND_KEY = "mrtr:key"
"""Under the key prefix: the requestState key the replicas share when `mrtr.secret` is not set."""

SESSION_NOTIFICATION_EVENT = "session_notification"
"""Event kind: a notification for one session (fields: session, message), for the replica holding its GET stream."""

NOT_READY_REASON = "redis unreachable (store.required is true)"

NOT_READY_AFTER_SECONDS = 2.0
"""With store.required, a Redis lost at run time makes the gateway not ready only once it stays down
this long: a blink must not pull every replica out of the load balancer at once."""


@dataclass(slots=True)
class SharedState:
    """The stores the app uses, whichever kind they are."""

    snapshots: SnapshotStore
    sessions: SessionStore
    rate_limiter: RateLimiter
    seal: StateSeal  # seals and opens multi-round `requestState`s
    secrets: SecretStore = field(default_factory=MemoryStore)  # outbound OAuth: tokens, grants, sign-ins
    replica_id: str = field(default_factory=lambda: secrets.token_hex(8))  # the event bus's, with Redis
    health: StoreHealth | None = None  # None: the memory store, always up
    events: EventBus | None = None
    listening: SharedListening | None = None  # the other replicas' listeners, with Redis
    required: bool = False
    runners: list[Callable[[], Awaitable[None]]] = field(default_factory=list)  # background, while open
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    redis: Any = None  # the client every Redis part shares; None: the memory store
    key_prefix: str = ""
    reloads: ReloadLog = field(init=False)  # config loads and reloads, for the status page
    replicas: Replicas = field(init=False)  # the replicas seen through the store

    def __post_init__(self) -> None:
        """The reload log and the replicas' heartbeats: shared through Redis when there is one."""
        self.reloads = ReloadLog(replica=self.replica_id, redis=self.redis, key=f"{self.key_prefix}{RELOADS_KEY}",
                                 health=self.health)
        self.replicas = Replicas(replica_id=self.replica_id, redis=self.redis,
                                 key=f"{self.key_prefix}{REPLICAS_KEY}", health=self.health)

    def bind(self, streams: StreamHub, *, on_ended: Callable[[str], None] | None = None) -> None:
        """Whatever ends a session (DELETE, idleness, its tenant's budget, another replica's DELETE)
        closes its GET stream and drops its replay history; `on_ended` hears of it too."""
        self.sessions.on_ended(streams.forget)
        if on_ended is not None:
            self.sessions.on_ended(on_ended)

    def share_answers(self, asks: PendingAsks) -> ForwardAnswer | None:
        """A client's answer that reaches another replica than the one that asked is published;
        the replica whose ask waits for it (keyed by session) takes it. None: one process only."""
        events = self.events
        if events is None:
            return None

        async def on_answer(event: dict[str, Any]) -> None:
            session, message = event.get("session"), event.get("message")
            if isinstance(session, str) and isinstance(message, dict):
                asks.answer(session, message)

        async def forward(session: str, message: dict[str, Any]) -> None:
            with contextlib.suppress(StoreUnavailable):  # then the ask times out, as if unanswered
                await events.publish(CLIENT_ANSWER_EVENT, session=session, message=message)

        events.on(CLIENT_ANSWER_EVENT, on_answer)
        return forward

    def share_rounds(self, rounds: Rounds, *, max_wait: float) -> None:
        """A retry that reaches another replica than the one holding its round is passed on to it."""
        if self.events is not None:
            RemoteRounds(self.events, rounds, max_wait=max_wait)

    def session_sink(self, streams: StreamHub) -> Callable[[str], Callable[[dict[str, Any]], None]]:
        """Notifications for one session's client (its resource updates) go on its GET stream: here, or,
        with Redis, through the event channel to the replica that holds that stream."""
        events, sending = self.events, set[asyncio.Task[None]]()
        if events is None:
            return lambda session: functools.partial(streams.send, session)

        async def on_notification(event: dict[str, Any]) -> None:
            session, message = event.get("session"), event.get("message")
            if isinstance(session, str) and isinstance(message, dict):
                streams.send(session, message)

        async def publish(session: str, message: dict[str, Any]) -> None:
            with contextlib.suppress(StoreUnavailable):  # then it is lost, as on a stream that broke
                await events.publish(SESSION_NOTIFICATION_EVENT, session=session, message=message)

        def sink(session: str, message: dict[str, Any]) -> None:
            if not streams.send(session, message):  # its stream is elsewhere, or nowhere
                task = asyncio.get_running_loop().create_task(publish(session, message))
                sending.add(task)
                task.add_done_callback(sending.discard)

        events.on(SESSION_NOTIFICATION_EVENT, on_notification)
        return lambda session: functools.partial(sink, session)

    async def readiness(self) -> str | None:
        """For /readyz: with store.required, not ready until Redis first answers, or once it stays down."""
        if self.health is None or self.health.up or not self.required:
            return None  # with required: false a gateway without Redis is ready, on local state
        if self.health.ever_up and self.health.down_seconds() < NOT_READY_AFTER_SECONDS:
            return None
        return NOT_READY_REASON


class SharedRateLimiter:
    """The Redis limiter, skipped while Redis is known to be down (local counters answer at once)."""

    def __init__(self, limiter: RedisRateLimiter, health: StoreHealth) -> None:
        self.limiter = limiter
        self.health = health

    async def check(self, tenant: str, limit: RateLimitConfig, cost: int = 1) -> Decision:
        if not self.health.up:
            return self.limiter.fallback.check_now(tenant, limit, cost)
        return await self.limiter.check(tenant, limit, cost)


@contextlib.asynccontextmanager
async def open_shared_state(config: Config, *, metrics: Metrics | None = None,
                            current: Callable[[], Config] | None = None) -> AsyncIterator[SharedState]:
    """The shared state for this process, running until the context ends. `current` gives the config
    in force (a reload changes tenants' session budgets); by default `config`, for good."""
    limits = session_limits(current or (lambda: config))
    if not config.store.redis_url:
        sessions = MemorySessionStore(idle_seconds=config.server.session_idle_seconds, limit_for=limits,
                                      on_count=metrics.sessions_observed if metrics is not None else None)
        expiry = asyncio.create_task(sessions.run(), name="session-expiry")
        try:
            yield SharedState(MemorySnapshotStore(), sessions, MemoryRateLimiter(), state_seal(config))
        finally:
            await cancel_quietly(expiry)
        return
    redis = create_client(config.store.redis_url)
    health = StoreHealth(name=redacted(config.store.redis_url),
                         on_change=metrics.store_observed if metrics is not None else None)
    state = _redis_state(config, redis, health, metrics, limits)
    try:
        await _start(state, redis, health)
        if not config.mrtr.secret:
            await _share_round_key(state, redis, f"{config.store.key_prefix}{ROUND_KEY}")
        yield state
    finally:
        for task in state.tasks:
            await cancel_quietly(task)
        await close_client(redis)


def _redis_state(config: Config, redis: Any, health: StoreHealth, metrics: Metrics | None,
                 limits: Callable[[str], int]) -> SharedState:
    prefix = config.store.key_prefix
    events = EventBus(redis, channel=f"{prefix}events", health=health)
    snapshots = RedisSnapshotStore(redis, key_prefix=prefix, backends=[b.name for b in config.backends],
                                   health=health, events=events, ttl_seconds=snapshot_ttl(config))
    sessions = RedisSessionStore(redis, key_prefix=prefix, health=health, events=events,
                                 idle_seconds=config.server.session_idle_seconds, limit_for=limits,
                                 on_count=metrics.sessions_observed if metrics is not None else None)
    limiter = SharedRateLimiter(RedisRateLimiter(redis, key_prefix=prefix, on_failure=health.failed), health)
    listening = SharedListening(events)
    secrets = RedisStore(redis, key_prefix=prefix, health=health)
    return SharedState(snapshots, sessions, limiter, state_seal(config), secrets, replica_id=events.replica_id,
                       health=health,
                       events=events, listening=listening, required=config.store.required,
                       runners=[events.run, sessions.run, lambda: health.watch(redis.ping), listening.run],
                       redis=redis, key_prefix=prefix)


async def _start(state: SharedState, redis: Any, health: StoreHealth) -> None:
    """Learn whether Redis answers before serving: readiness and the first catalogue build depend on it."""
    await health.probe(redis.ping)
    state.tasks = [asyncio.create_task(run(), name="store-background") for run in state.runners]
    if health.up and state.events is not None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SUBSCRIBE_WAIT_SECONDS):
                await state.events.subscribed.wait()


def state_seal(config: Config) -> StateSeal:
    """`mrtr.secret`, else this process's own key until the replicas' shared one is known."""
    secret = config.mrtr.secret
    return StateSeal([secret.encode() if secret else secrets.token_bytes(32)], config.mrtr.round_seconds)


async def _share_round_key(state: SharedState, redis: Any, key: str) -> None:
    """The replicas' shared key: the first replica's (SET NX), learnt now and again whenever the event
    subscription is made anew (Redis may have been down at start). Keys learnt earlier still open states."""
    async def learn() -> None:
        assert state.health is not None
        with contextlib.suppress(StoreUnavailable):
            await state.health.call(lambda: redis.set(key, secrets.token_hex(32), nx=True))
            shared = await state.health.call(lambda: redis.get(key))
            if isinstance(shared, bytes | str) and shared:
                state.seal.prefer(shared.encode() if isinstance(shared, str) else shared)

    await learn()
    if state.events is not None:
        state.events.on_resync(learn)


def session_limits(current: Callable[[], Config]) -> Callable[[str], int]:
    """Each tenant's session budget in the config in force (a tenant no longer configured gets the defaults)."""

    def limit(tenant: str) -> int:
        config = current()
        return (config.tenants[tenant].limits if tenant in config.tenants else config.limits).sessions

    return limit


def snapshot_ttl(config: Config) -> float:
    """Snapshots outlive many refresh intervals and the stale window; a removed backend's goes away."""
    return max(10 * config.catalogue.refresh_seconds, config.catalogue.max_stale_seconds)


async def close_client(redis: Any) -> None:
    """Close the pool, and a Sentinel client's connections to the sentinels too."""
    await close_quietly(redis)
    manager = getattr(getattr(redis, "connection_pool", None), "sentinel_manager", None)
    for sentinel in getattr(manager, "sentinels", ()):
        await close_quietly(sentinel)
