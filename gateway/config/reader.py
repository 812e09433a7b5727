"""Typed reading of one config mapping, every problem reported with its key path.

A missing key takes its model field's default (gateway.config.model). A key set to null
means None where that default is None, an empty list for lists and an empty mapping for
sections; anywhere else null is reported like any value of the wrong kind.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from gateway.config.model import default_of

T = TypeVar("T")

HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
"""An HTTP token (RFC 9110 §5.1)."""
HEADER_BREAK = re.compile(r"[\r\n\0]")
FRAMING_HEADERS = frozenset((
    "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer",
    "proxy-connection",
))
"""Headers the HTTP client writes itself: a configured copy would be sent twice or break the framing."""

KIND_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list",
              dict: "a mapping"}


class ConfigError(ValueError):
    """A bad configuration; the message starts with the key path."""


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def mapping(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{path or '<root>'}: must be a mapping")
    return value


def _is_kind(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return kind is bool
    return isinstance(value, int | float) if kind is float else isinstance(value, kind)


class Section:
    """A mapping being read into `model` (a config dataclass); unknown keys are reported by `done()`."""

    def __init__(self, data: Any, path: str, model: type | None = None) -> None:
        self.data = mapping(data, path)
        self.path = path
        self.model = model
        self.seen: set[str] = set()

    def where(self, key: str) -> str:
        return join(self.path, key)

    def default(self, name: str) -> Any:
        return default_of(self.model, name) if self.model is not None else None

    def get(self, key: str, kind: type, *, field: str | None = None) -> Any:
        """The value of `key` (for model field `field`, by default the same name), checked against `kind`."""
        self.seen.add(key)
        default = self.default(field or key)
        value = self.data.get(key, default)
        if value is None and default is None:
            return None
        if not _is_kind(value, kind):
            raise ConfigError(f"{self.where(key)}: must be {KIND_NAMES[kind]}")
        return float(value) if kind is float else value

    def required(self, key: str, kind: type) -> Any:
        self.seen.add(key)
        value = self.data.get(key)
        if value is None:
            raise ConfigError(f"{self.where(key)}: required")
        if not _is_kind(value, kind):
            raise ConfigError(f"{self.where(key)}: must be {KIND_NAMES[kind]}")
        return value

    def number(self, key: str, *, minimum: float = 0.0) -> float:
        value = self.get(key, float) if self.data.get(key, 0) is not None else None
        if value is None or value < minimum:
            raise ConfigError(f"{self.where(key)}: must be a number >= {minimum:g}")
        return value

    def integer(self, key: str, *, minimum: int = 0) -> int:
        value = self.optional_integer(key, minimum=minimum)
        if value is None:
            raise ConfigError(f"{self.where(key)}: must be an integer")
        return value

    def optional_integer(self, key: str, *, minimum: int = 0) -> int | None:
        value = self.get(key, int)
        if value is not None and value < minimum:
            raise ConfigError(f"{self.where(key)}: must be an integer >= {minimum}")
        return value

    def strings(self, key: str, *, field: str | None = None) -> tuple[str, ...]:
        self.seen.add(key)
        if key not in self.data:
            return tuple(self.default(field or key) or ())
        value = self.data[key]
        if value is None:
            return ()
        if not isinstance(value, list):
            raise ConfigError(f"{self.where(key)}: must be a list")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise ConfigError(f"{self.where(key)}[{i}]: must be a string")
        return tuple(value)

    def string_map(self, key: str) -> dict[str, str]:
        self.seen.add(key)
        out: dict[str, str] = {}
        for k, v in mapping(self.data.get(key), self.where(key)).items():
            if not isinstance(v, str | int | float) or isinstance(v, bool):
                raise ConfigError(f"{self.where(key)}.{k}: must be a string")
            out[str(k)] = str(v)
        return out

    def header_map(self, key: str) -> dict[str, str]:
        """HTTP headers: names are tokens, and no value may break its line (header injection)."""
        headers = self.string_map(key)
        for name, value in headers.items():
            if not HEADER_NAME.fullmatch(name):
                raise ConfigError(f"{self.where(key)}.{name}: not a valid HTTP header name")
            if HEADER_BREAK.search(value):
                raise ConfigError(f"{self.where(key)}.{name}: line breaks and NUL are not allowed in a header value")
            if name.lower() in FRAMING_HEADERS:
                raise ConfigError(f"{self.where(key)}.{name}: set by the gateway's HTTP client, may not be configured")
        return headers

    def section(self, key: str, model: type | None = None) -> Section:
        self.seen.add(key)
        return Section(self.data.get(key), self.where(key), model)

    def items(self, key: str, model: type | None = None) -> list[Section]:
        self.seen.add(key)
        value = self.data.get(key)
        if value is not None and not isinstance(value, list):
            raise ConfigError(f"{self.where(key)}: must be a list")
        return [Section(item, f"{self.where(key)}[{i}]", model) for i, item in enumerate(value or [])]

    def check(self, key: str, rule: Callable[[str], None], value: str) -> None:
        """Run `rule` on `value` (a rule raises ValueError with its reason); its complaint gets the key path."""
        try:
            rule(value)
        except ValueError as exc:
            raise ConfigError(f"{self.where(key)}: {exc}") from None

    def ignore(self, *keys: str) -> None:
        """Accept `keys` without reading them."""
        self.seen.update(keys)

    def done(self) -> None:
        unknown = sorted(set(map(str, self.data)) - self.seen)
        if unknown:
            raise ConfigError(f"{self.where(unknown[0])}: unknown key")


def read(section: Section, build: Callable[[Section], T]) -> T:
    """Build a value from a section, then refuse any key the builder did not read."""
    value = build(section)
    section.done()
    return value
