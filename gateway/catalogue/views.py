"""A tenant's view of the catalogue: filtered, paginated and pre-serialized once per version."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

import orjson

from gateway.catalogue.arguments import SchemaCheck
from gateway.catalogue.listings import KINDS, RESOURCES, TEMPLATES, Kind, ListedEntry, Listing
from gateway.catalogue.listviews import ListingView, Policy, Route, resolve_uri
from gateway.catalogue.merge import Catalogue, ToolEntry
from gateway.catalogue.pages import encode_pages, page_at
from gateway.config import TenantConfig
from gateway.errors import InvalidParams
from gateway.protocol import spec


def visible(entry: ToolEntry, tenant: TenantConfig) -> bool:
    """Whether a tenant may see (and so call) a catalogue entry."""
    if "*" not in tenant.backends and entry.backend not in tenant.backends:
        return False
    name = entry.exposed
    if not any(fnmatchcase(name, glob) for glob in tenant.tools_allow):
        return False
    return not any(fnmatchcase(name, glob) for glob in tenant.tools_deny)


class TenantView:
    """The tools one tenant sees in one catalogue version (and, built on first use, its prompts,
    resources and templates: `listing`).

    Pages of `tools/list` are encoded to JSON bytes once, here, and served as-is.
    Cursors name this view, so a cursor from another tenant or another version is refused.
    """

    def __init__(self, catalogue: Catalogue, tenant: TenantConfig, *, page_size: int) -> None:
        self.tenant = tenant.name
        self.source = tenant  # the policy it was built under
        self.entries = tuple(e for e in catalogue.entries if visible(e, tenant))
        self.by_name: Mapping[str, ToolEntry] = {e.exposed: e for e in self.entries}
        if len(self.entries) == len(catalogue.entries):  # sees every tool: share the catalogue's, not a copy
            self.entries, self.by_name = catalogue.entries, catalogue.by_name
        self.catalogue_version = catalogue.version
        self.policy = Policy.of(tenant)
        self.id = hashlib.sha256(
            f"{tenant.name}\0{catalogue.version}\0{tenant.tools_allow}{tenant.tools_deny}{self.policy}".encode()
        ).hexdigest()[:16]
        self.page_size = page_size
        # Joined from each tool's JSON, so nothing is decoded and each page is allocated at its size.
        self.pages = encode_pages(self.id, [e.json() for e in self.entries], "tools", page_size)
        self.catalogue = catalogue
        self._listings: dict[str, ListingView] = {}
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
        return page_at(self.pages, self.id, self.page_size, cursor)

    def listing(self, kind: Kind) -> ListingView:
        """This tenant's prompts, resources or templates, built on first use."""
        view = self._listings.get(kind.name)
        if view is None:
            view = self._listings[kind.name] = ListingView(kind, self.catalogue, self.policy, self.id,
                                                            page_size=self.page_size)
        return view

    def resolve_uri(self, uri: Any) -> Route | None:
        """Where a gateway URI is read: its backend and original URI, or None when this tenant has no such URI."""
        if not isinstance(uri, str):
            return None
        return resolve_uri(self.catalogue, self.policy, self.listing(RESOURCES), self.listing(TEMPLATES), uri)

    def extends(self, offer: str) -> bool:
        """Whether a backend this tenant uses offers `offer` (an extension, e.g. TASKS_OFFER: no globs filter it)."""
        return any(self.catalogue.offers(b, offer) for b, _ in self.catalogue.order if self.policy.uses(b))

    def offers(self, capability: str) -> bool:
        """Whether this tenant is served `capability` (prompts, resources, completions).

        A backend it may use must have declared it, and the tenant's globs must leave something of
        it visible: a client is not told of prompts it can never list. Completions complete prompt
        and resource-template arguments, so they go with those.
        """
        declared = any(self.catalogue.offers(b, capability) for b, _ in self.catalogue.order if self.policy.uses(b))
        if not declared:
            return False
        if capability == "completions":
            return self.offers("prompts") or self.offers("resources")
        if not self.policy.filters(capability):  # nothing hidden: served, even while none are listed yet
            return True
        return any(self.listing(kind).entries for kind in KINDS if kind.capability == capability)

    def validate_arguments(self, entry: ToolEntry, arguments: dict[str, Any]) -> str | None:
        """The first schema violation of `arguments`, or None when they conform."""
        check = self._validators.get(entry.exposed)
        if check is None:
            check = self._validators[entry.exposed] = SchemaCheck(entry.decoded().get("inputSchema"))
        problem = check.problem(arguments)
        return f"Invalid arguments for tool {entry.exposed}: {problem}" if problem else None


class ViewCache:
    """Tenant views of the current catalogue; dropped whole when the catalogue changes."""

    def __init__(self, *, page_size: int, on_lookup: Callable[[bool], None] | None = None) -> None:
        self.page_size = page_size
        self.on_lookup = on_lookup or (lambda hit: None)  # metrics: hit or miss
        self._version = ""
        self._views: dict[str, TenantView] = {}

    def clear(self, page_size: int) -> None:
        """Drop every view: they were built under tenant policies a reload may have changed."""
        self.page_size, self._views, self._version = page_size, {}, ""

    def get(self, catalogue: Catalogue, tenant: TenantConfig) -> TenantView:
        if catalogue.version != self._version:
            self._views, self._version = {}, catalogue.version
        view = self._views.get(tenant.name)
        # `is`: a request admitted before a reload carries the tenant's old policy, and must not
        # leave its view behind for the requests admitted under the new one (nor use theirs).
        hit = view is not None and view.source is tenant
        self.on_lookup(hit)
        if not hit:
            view = self._views[tenant.name] = TenantView(catalogue, tenant, page_size=self.page_size)
        return view  # type: ignore[return-value]

    def tenants_changed(self, old: Catalogue, new: Catalogue, tenants: Sequence[TenantConfig]) -> list[str]:
        """Tenants who see a tool that was added, removed or changed (for list_changed).

        Only the differing tools are checked against each tenant's policy, so a refresh that
        changed one backend costs that backend's tools, not the whole catalogue per tenant.
        """
        differing = _differing(old, new)
        return [t.name for t in tenants if any(visible(e, t) for e in differing)]

    def changes(self, old: Catalogue, new: Catalogue, tenants: Sequence[TenantConfig]) -> dict[str, list[str]]:
        """For each list_changed notification, the tenants whose view of that kind differs (none: absent)."""
        changed = {spec.TOOLS_LIST_CHANGED: self.tenants_changed(old, new, tenants)}
        policies = [(t.name, Policy.of(t)) for t in tenants]
        for kind in KINDS:
            differing = _differing_items(old.listings.get(kind.name), new.listings.get(kind.name))
            hit = [name for name, policy in policies
                   if any(policy.permits(kind.capability, e.backend, e.exposed) for e in differing)]
            changed[kind.list_changed] = sorted({*changed.get(kind.list_changed, ()), *hit})
        return {method: names for method, names in changed.items() if names}


def policy_changes(old: Catalogue, new: Catalogue, before: Mapping[str, TenantConfig],
                   after: Mapping[str, TenantConfig]) -> dict[str, list[str]]:
    """For each list_changed notification, the tenants whose policy a reload changed and whose view
    of that kind differs: the old catalogue under the old policy against the new under the new."""
    changed: dict[str, list[str]] = {}
    for name, tenant in after.items():
        previous = before.get(name)
        if previous is None or previous == tenant:
            continue  # a new tenant has no client yet; an unchanged one is the catalogue listener's
        views = TenantView(old, previous, page_size=DIFF_PAGE), TenantView(new, tenant, page_size=DIFF_PAGE)
        for method in _kinds_differing(*views):
            changed.setdefault(method, []).append(name)
    return changed


DIFF_PAGE = 10_000
"""Views built only to be compared: one page is enough."""


def _kinds_differing(old: TenantView, new: TenantView) -> list[str]:
    """The list_changed methods of the kinds whose items differ between two views of one tenant."""
    methods = [spec.TOOLS_LIST_CHANGED] if [e.json() for e in old.entries] != [e.json() for e in new.entries] else []
    for kind in KINDS:
        before, after = old.listing(kind).entries, new.listing(kind).entries
        if [e.json(kind) for e in before] != [e.json(kind) for e in after] and kind.list_changed not in methods:
            methods.append(kind.list_changed)
    return methods


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


def _differing_items(old: Listing | None, new: Listing | None) -> list[ListedEntry]:
    """Prompts, resources or templates added, removed or changed between two listings."""
    before, after = (old.by_key if old else {}), (new.by_key if new else {})
    out = [e for key, e in before.items() if after.get(key) != e]
    return out + [e for key, e in after.items() if before.get(key) != e]
