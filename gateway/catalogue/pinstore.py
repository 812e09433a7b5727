"""Where approvals and held definitions live: this process (memory) or Redis (every replica, restarts).

With Redis, per backend:

- `{prefix}pins:{backend}`: a hash of approved definitions, field `KIND/NAME`, value JSON
  `{fingerprint, definition, at, by}`; approvals never expire;
- `{prefix}pins-held:{backend}`: a hash of the definitions held for review, same shape plus
  `reason` (changed, new, invisible) and `rejected`;
- a `pins` event on the store's channel after every write, on which the other replicas re-read
  the backend's approvals and rebuild their catalogue.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import orjson
import structlog

from gateway.catalogue.fingerprints import ItemKey, key_text, parse_key
from gateway.catalogue.store import RedisSnapshotStore
from gateway.store.events import EventBus
from gateway.store.health import StoreHealth

log = structlog.get_logger("gateway.catalogue")

PINS_EVENT = "pins"
"""Event kind: a backend's approvals or held items changed (fields: backend)."""

PinListener = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Pin:
    """One definition: approved, or held for review."""

    fingerprint: str
    definition: Any
    at: float
    by: str = ""  # who approved it: an admin's subject, `first-seen`, `record` or `lockfile`
    reason: str = ""  # why it is held
    rejected: bool = False

    def encoded(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def decoded(cls, raw: bytes | str) -> Pin | None:
        try:
            data = orjson.loads(raw)
            return cls(str(data["fingerprint"]), data["definition"], float(data["at"]), str(data.get("by", "")),
                       str(data.get("reason", "")), bool(data.get("rejected", False)))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None


Pins = dict[ItemKey, Pin]


class PinStore(Protocol):
    async def approved(self, backend: str) -> Pins: ...

    async def held(self, backend: str) -> Pins: ...

    async def approve(self, backend: str, pins: Mapping[ItemKey, Pin]) -> None:
        """Approve these definitions; any held ones of the same items are dropped."""

    async def hold(self, backend: str, pins: Mapping[ItemKey, Pin]) -> None: ...

    async def unhold(self, backend: str, keys: Iterable[ItemKey]) -> None: ...

    def on_change(self, listener: PinListener) -> None: ...


class MemoryPinStore:
    """The embedded default: approvals live as long as the process (a lockfile keeps them longer).

    Kept encoded, as in Redis: a decoded definition takes several times the memory of its JSON."""

    def __init__(self) -> None:
        self._approved: dict[str, dict[ItemKey, bytes]] = {}
        self._held: dict[str, dict[ItemKey, bytes]] = {}

    async def approved(self, backend: str) -> Pins:
        return _decoded(self._approved.get(backend, {}))

    async def held(self, backend: str) -> Pins:
        return _decoded(self._held.get(backend, {}))

    async def approve(self, backend: str, pins: Mapping[ItemKey, Pin]) -> None:
        self._approved.setdefault(backend, {}).update((key, pin.encoded()) for key, pin in pins.items())
        await self.unhold(backend, pins)

    async def hold(self, backend: str, pins: Mapping[ItemKey, Pin]) -> None:
        self._held.setdefault(backend, {}).update((key, pin.encoded()) for key, pin in pins.items())

    async def unhold(self, backend: str, keys: Iterable[ItemKey]) -> None:
        held = self._held.get(backend, {})
        for key in keys:
            held.pop(key, None)

    def on_change(self, listener: PinListener) -> None:
        return None  # nobody else writes here


def _decoded(raw: Mapping[ItemKey, bytes]) -> Pins:
    return {key: pin for key, value in raw.items() if (pin := Pin.decoded(value)) is not None}


class RedisPinStore:
    """Approvals every replica shares; a write fails with StoreUnavailable while Redis is down."""

    def __init__(self, redis: Any, *, key_prefix: str, health: StoreHealth, events: EventBus | None) -> None:
        self.redis = redis
        self.key_prefix = key_prefix
        self.health = health
        self.events = events
        self._listeners: list[PinListener] = []
        if events is not None:
            events.on(PINS_EVENT, self._on_event)

    def key(self, backend: str, held: bool = False) -> str:
        return f"{self.key_prefix}{'pins-held' if held else 'pins'}:{backend}"

    async def approved(self, backend: str) -> Pins:
        return await self._read(self.key(backend))

    async def held(self, backend: str) -> Pins:
        return await self._read(self.key(backend, held=True))

    async def approve(self, backend: str, pins: Mapping[ItemKey, Pin]) -> None:
        if pins:
            mapping = {key_text(key): pin.encoded() for key, pin in pins.items()}
            await self.health.call(lambda: self.redis.hset(self.key(backend), mapping=mapping))
            await self._drop(backend, pins)
            await self._publish(backend)

    async def hold(self, backend: str, pins: Mapping[ItemKey, Pin]) -> None:
        if pins:
            mapping = {key_text(key): pin.encoded() for key, pin in pins.items()}
            await self.health.call(lambda: self.redis.hset(self.key(backend, held=True), mapping=mapping))
            await self._publish(backend)

    async def unhold(self, backend: str, keys: Iterable[ItemKey]) -> None:
        if await self._drop(backend, keys):
            await self._publish(backend)

    def on_change(self, listener: PinListener) -> None:
        self._listeners.append(listener)

    async def _drop(self, backend: str, keys: Iterable[ItemKey]) -> int:
        fields = [key_text(key) for key in keys]
        if not fields:
            return 0
        return int(await self.health.call(lambda: self.redis.hdel(self.key(backend, held=True), *fields)))

    async def _read(self, key: str) -> Pins:
        raw = await self.health.call(lambda: self.redis.hgetall(key))
        pins: Pins = {}
        for field_, value in raw.items():
            pin = Pin.decoded(value)
            try:
                item = parse_key(field_.decode() if isinstance(field_, bytes) else field_)
            except ValueError:
                pin = None
            if pin is None:
                log.warning("pin_unreadable", key=key)
                continue
            pins[item] = pin
        return pins

    async def _publish(self, backend: str) -> None:
        if self.events is not None:
            await self.events.publish(PINS_EVENT, backend=backend)

    async def _on_event(self, event: dict[str, Any]) -> None:
        backend = event.get("backend")
        if isinstance(backend, str):
            for listener in self._listeners:
                await listener(backend)


def pin_store_for(snapshots: object) -> PinStore:
    """Approvals kept where the snapshots are: in Redis beside them, or in this process."""
    if isinstance(snapshots, RedisSnapshotStore):
        return RedisPinStore(snapshots.redis, key_prefix=snapshots.key_prefix, health=snapshots.health,
                             events=snapshots.events)
    return MemoryPinStore()
