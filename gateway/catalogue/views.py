"""A tenant's view of the catalogue: filtered, paginated and pre-serialized once per version."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import orjson
from jsonschema import exceptions as schema_errors
from jsonschema import validators

from gateway.catalogue.merge import Catalogue, ToolEntry
from gateway.config import TenantConfig
from gateway.errors import InvalidParams


def visible(entry: ToolEntry, tenant: TenantConfig) -> bool:
    """Whether a tenant may see (and so call) a catalogue entry."""
    if "*" not in tenant.backends and entry.backend not in tenant.backends:
        return False
    name = entry.exposed
    if not any(fnmatchcase(name, glob) for glob in tenant.tools_allow):
        return False
    return not any(fnmatchcase(name, glob) for glob in tenant.tools_deny)


@dataclass(frozen=True, slots=True)
class _Cursor:
    view: str
    offset: int


class TenantView:
    """The tools one tenant sees in one catalogue version.

    Pages of `tools/list` are encoded to JSON bytes once, here, and served as-is.
    Cursors name this view, so a cursor from another tenant or another version is refused.
    """

    def __init__(self, catalogue: Catalogue, tenant: TenantConfig, *, page_size: int) -> None:
        self.tenant = tenant.name
        self.entries = tuple(e for e in catalogue.entries if visible(e, tenant))
        self.by_name = {e.exposed: e for e in self.entries}
        self.catalogue_version = catalogue.version
        self.id = hashlib.sha256(
            f"{tenant.name}\0{catalogue.version}\0{tenant.backends}{tenant.tools_allow}{tenant.tools_deny}".encode()
        ).hexdigest()[:16]
        self.page_size = page_size
        self.pages = self._encode_pages()
        self._validators: dict[str, Any] = {}

    def lookup(self, name: Any) -> ToolEntry:
        """The entry for an exposed name; unknown and invisible names look the same."""
        entry = self.by_name.get(name) if isinstance(name, str) else None
        if entry is None:
            raise InvalidParams(f"Unknown tool: {str(name)[:200]}")
        return entry

    def page(self, cursor: Any) -> orjson.Fragment:
        """The pre-encoded `tools/list` result for a cursor (None = first page)."""
        if cursor is None:
            return self.pages[0]
        parsed = _decode_cursor(cursor)
        if parsed is None or parsed.view != self.id or parsed.offset % self.page_size:
            raise InvalidParams("Invalid cursor")
        index = parsed.offset // self.page_size
        if not 0 < index < len(self.pages):
            raise InvalidParams("Invalid cursor")
        return self.pages[index]

    def validate_arguments(self, entry: ToolEntry, arguments: dict[str, Any]) -> str | None:
        """The first schema violation of `arguments`, or None when they conform."""
        validator = self._validators.get(entry.exposed)
        if validator is None:
            validator = self._validators[entry.exposed] = _compile(entry.tool.get("inputSchema"))
        if validator is False:
            return None
        try:
            if validator.is_valid(arguments):  # the common case: no error search, no best_match ranking
                return None
            error = schema_errors.best_match(validator.iter_errors(arguments))
        except Exception:  # e.g. an unresolvable $ref: a schema we cannot evaluate is the backend's to judge
            self._validators[entry.exposed] = False
            return None
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"Invalid arguments for tool {entry.exposed}: {error.message}" + (f" (at {where})" if where else "")

    def _encode_pages(self) -> list[orjson.Fragment]:
        tools = [e.tool for e in self.entries]
        chunks = [tools[i : i + self.page_size] for i in range(0, len(tools), self.page_size)] or [[]]
        pages = []
        for i, chunk in enumerate(chunks):
            result: dict[str, Any] = {"tools": chunk}
            if i + 1 < len(chunks):
                result["nextCursor"] = _encode_cursor(_Cursor(self.id, (i + 1) * self.page_size))
            pages.append(orjson.Fragment(orjson.dumps(result)))
        return pages


def _compile(schema: Any) -> Any:
    """A validator for a tool's inputSchema, or False when the schema itself is unusable."""
    if not isinstance(schema, dict):
        return False
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except schema_errors.SchemaError:
        return False  # the backend's schema is broken; let the backend judge the arguments
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _encode_cursor(cursor: _Cursor) -> str:
    raw = orjson.dumps({"v": cursor.view, "o": cursor.offset})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(text: Any) -> _Cursor | None:
    if not isinstance(text, str) or len(text) > 200:
        return None
    try:
        data = orjson.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    view, offset = data.get("v"), data.get("o")
    if not isinstance(view, str) or not isinstance(offset, int) or isinstance(offset, bool):
        return None
    return _Cursor(view, offset)


class ViewCache:
    """Tenant views of the current catalogue; dropped whole when the catalogue changes."""

    def __init__(self, *, page_size: int, on_lookup: Callable[[bool], None] | None = None) -> None:
        self.page_size = page_size
        self.on_lookup = on_lookup or (lambda hit: None)  # metrics: hit or miss
        self._version = ""
        self._views: dict[str, TenantView] = {}

    def get(self, catalogue: Catalogue, tenant: TenantConfig) -> TenantView:
        if catalogue.version != self._version:
            self._views, self._version = {}, catalogue.version
        view = self._views.get(tenant.name)
        self.on_lookup(view is not None)
        if view is None:
            view = self._views[tenant.name] = TenantView(catalogue, tenant, page_size=self.page_size)
        return view

    def tenants_changed(self, old: Catalogue, new: Catalogue, tenants: Sequence[TenantConfig]) -> list[str]:
        """Tenants who see a tool that was added, removed or changed (for list_changed).

        Only the differing tools are checked against each tenant's policy, so a refresh that
        changed one backend costs that backend's tools, not the whole catalogue per tenant.
        """
        differing = _differing(old, new)
        return [t.name for t in tenants if any(visible(e, t) for e in differing)]


def _differing(old: Catalogue, new: Catalogue) -> list[ToolEntry]:
    """Entries present in one catalogue but not the same in the other (unchanged ones are identical)."""
    out = []
    for one, other in ((old, new), (new, old)):
        for entry in one.entries:
            twin = other.by_name.get(entry.exposed)
            if twin is entry:
                continue
            if twin is None or twin.backend != entry.backend or twin.tool != entry.tool:
                out.append(entry)
    return out
