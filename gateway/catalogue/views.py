"""A tenant's view of the catalogue: filtered, paginated and pre-serialized once per version."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import orjson

from gateway.catalogue.arguments import SchemaCheck
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
        self.by_name: Mapping[str, ToolEntry] = {e.exposed: e for e in self.entries}
        if len(self.entries) == len(catalogue.entries):  # sees every tool: share the catalogue's, not a copy
            self.entries, self.by_name = catalogue.entries, catalogue.by_name
        self.catalogue_version = catalogue.version
        self.id = hashlib.sha256(
            f"{tenant.name}\0{catalogue.version}\0{tenant.backends}{tenant.tools_allow}{tenant.tools_deny}".encode()
        ).hexdigest()[:16]
        self.page_size = page_size
        self.pages = self._encode_pages()
        self._validators: dict[str, SchemaCheck] = {}

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
        check = self._validators.get(entry.exposed)
        if check is None:
            check = self._validators[entry.exposed] = SchemaCheck(entry.decoded().get("inputSchema"))
        problem = check.problem(arguments)
        return f"Invalid arguments for tool {entry.exposed}: {problem}" if problem else None

    def _encode_pages(self) -> list[orjson.Fragment]:
        starts = range(0, len(self.entries), self.page_size) or range(1)  # no tools: one empty page
        return [self._encode_page(start) for start in starts]

    def _encode_page(self, start: int) -> orjson.Fragment:
        """Joined from each tool's JSON, so nothing is decoded and the page is allocated at its size."""
        end = start + self.page_size
        tools = b",".join([e.json() for e in self.entries[start:end]])
        more = b""
        if end < len(self.entries):
            more = b',"nextCursor":' + orjson.dumps(_encode_cursor(_Cursor(self.id, end)))
        return orjson.Fragment(b"".join((b'{"tools":[', tools, b"]", more, b"}")))


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
