"""A tenant's view of the catalogue: filtered, paginated and pre-serialized once per version.

With policy rules, a view is one policy class's (gateway.policy.Access): callers whose rules
come out the same share it, so thousands of users in a few groups make a few views.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

import orjson

from gateway.catalogue.arguments import SchemaCheck
from gateway.catalogue.audience import Audience, ChangedItems, ReloadAudience
from gateway.catalogue.callers import Refusal, ToolPlan, call_refusal, plan_tools, tool_refusal
from gateway.catalogue.discovery import always, listed_items
from gateway.catalogue.listings import KINDS, RESOURCES, TEMPLATES, Kind, ListedEntry, Listing
from gateway.catalogue.listviews import ListingView, Policy, Route, resolve_uri
from gateway.catalogue.merge import Catalogue, ToolEntry
from gateway.catalogue.pages import encode_pages, page_at
from gateway.config import SearchConfig, TenantConfig
from gateway.policy import Access, Item, Principal
from gateway.protocol import spec
from gateway.protocol.errors import InvalidParams

MAX_VIEWS = 4096
"""Views kept at once (tenants x policy classes); past it the least recently used is rebuilt when next asked."""


def visible(entry: ToolEntry, tenant: TenantConfig) -> bool:
    """Whether a tenant may see (and so call) a catalogue entry."""
    if "*" not in tenant.backends and entry.backend not in tenant.backends:
        return False
    name = entry.exposed
    if not any(fnmatchcase(name, glob) for glob in tenant.tools_allow):
        return False
    return not any(fnmatchcase(name, glob) for glob in tenant.tools_deny)


SEARCH_DEFAULTS = SearchConfig()


def listed_to(entry: ToolEntry, traits: frozenset[str] | None) -> bool:
    """Whether the backend lists the tool to a client with `traits` (None: any client; catalogue.variants)."""
    return traits is None or entry.tool.needs <= traits


class TenantView:
    """The tools one tenant sees in one catalogue version (and, built on first use, its prompts,
    resources and templates: `listing`).

    Pages of `tools/list` are encoded to JSON bytes once, here, and served as-is.
    Cursors name this view, so a cursor from another tenant or another version is refused.
    """

    def __init__(self, catalogue: Catalogue, tenant: TenantConfig, *, page_size: int,
                 access: Access | None = None, search: SearchConfig = SEARCH_DEFAULTS,
                 traits: frozenset[str] | None = None) -> None:
        self.tenant = tenant.name
        self.source = tenant  # the policy it was built under
        self.access = access  # the policy class it was built for; None: the tenant's globs alone
        self.entries = tuple(e for e in catalogue.entries if visible(e, tenant) and listed_to(e, traits))
        self.plans: Mapping[str, ToolPlan] = {}  # tools whose calls need more than a lookup (rules, overlays)
        shown: Mapping[str, bytes] = {}  # tools listed with a tightened inputSchema
        if access is not None and (access.applying or not access.default_allows):
            listed, self.plans, shown = plan_tools(self.entries, access)
            self.entries = tuple(listed)
        self.by_name: Mapping[str, ToolEntry] = {e.exposed: e for e in reversed(self.entries)}  # the first wins
        if len(self.entries) == len(catalogue.entries) and not catalogue.gated:  # every tool: share, not copy
            self.entries, self.by_name = catalogue.entries, catalogue.by_name
        self.catalogue_version = catalogue.version
        self.policy = Policy.of(tenant)
        self.id = hashlib.sha256(
            f"{tenant.name}\0{catalogue.version}\0{tenant.tools_allow}{tenant.tools_deny}{self.policy}"
            f"\0{access.key if access is not None else ''}\0{tenant.discovery}{tenant.always_listed}"
            f"\0{sorted(traits) if traits is not None else '*'}".encode()
        ).hexdigest()[:16]
        self.page_size = page_size
        self.shown = shown
        self.search = search if tenant.discovery == "search" else None  # search mode: what find_tools may give
        # Joined from each tool's JSON, so nothing is decoded and each page is allocated at its size.
        self.pages = encode_pages(self.id, self.listed(), "tools", page_size)
        self.catalogue = catalogue
        self.held = frozenset(name for name, e in catalogue.held.items() if visible(e, tenant) and listed_to(e, traits)
                              and (access is None or access.decide(Item("tools", name, e.backend)).allowed))
        self._listings: dict[str, ListingView] = {}
        self._validators: dict[str, SchemaCheck] = {}
        self._overlays: dict[int, SchemaCheck] = {}
        self.served: dict[str, Any] = {}  # virtual servers' views of this one, by server (catalogue.servers)

    def listed(self) -> list[bytes]:
        """The JSON of each tool tools/list gives, as this class sees it (an overlay tightens its inputSchema):
        every tool, or in search mode the gateway's search tools and the `always_listed` ones (discovery.py)."""
        if self.search is None:
            return [self.tool_json(e) for e in self.entries]
        always_listed = self.source.always_listed
        return listed_items([self.tool_json(e) for e in self.entries if always(e, always_listed)],
                            self.search.results, self.search.max_results)

    def searched(self) -> list[bytes] | None:
        """In search mode, the JSON of each tool find_tools may give, as this class sees it; else None."""
        return None if self.search is None else [self.tool_json(e) for e in self.entries]

    def tool_json(self, entry: ToolEntry) -> bytes:
        """A tool as this view shows it (rules may tighten its inputSchema)."""
        return self.shown.get(entry.exposed) or entry.json()

    def lookup(self, name: Any) -> ToolEntry:
        """The entry for an exposed name; unknown and invisible names look the same."""
        entry = self.by_name.get(name) if isinstance(name, str) else None
        if entry is None:
            if isinstance(name, str) and name in self.held:  # a tool this caller would be shown: nothing more revealed
                raise InvalidParams(f"Tool held for review: {name[:200]} (its backend changed its definition or "
                                    "added it, and an admin has not approved it yet)")
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
                                                            page_size=self.page_size, access=self.access)
        return view

    def resolve_uri(self, uri: Any) -> Route | None:
        """Where a gateway URI is read: its backend and original URI, or None when this tenant has no such URI."""
        if not isinstance(uri, str):
            return None
        route = resolve_uri(self.catalogue, self.policy, self.listing(RESOURCES), self.listing(TEMPLATES), uri)
        if route is None or self.access is None or uri in self.listing(RESOURCES).by_key:
            return route
        return route if self.access.decide(Item("resources", uri, route.backend)).allowed else None

    def tool_refusal(self, entry: ToolEntry, arguments: Mapping[str, Any],
                     principal: Principal | None) -> Refusal | None:
        """Why the policy refuses this call of a listed tool (a rule on the request, an overlay), or None."""
        plan = self.plans.get(entry.exposed)
        if plan is None or self.access is None:
            return None
        return tool_refusal(plan, self.access, principal, arguments, self._overlays)

    def refusal(self, kind: Kind, name: str, backend: str, principal: Principal | None, method: str,
                arguments: Mapping[str, Any]) -> Refusal | None:
        """Why the policy refuses this call of a listed prompt, resource or template, or None.

        Only items listed under a rule that reads the request are decided again.
        """
        if self.access is None or not self.access.reads_requests:
            return None
        if kind is RESOURCES and name not in self.listing(RESOURCES).by_key:
            pending = self.access.decide(Item(kind.name, name, backend)).conditional  # a URI read through a template
        else:
            pending = name in self.listing(kind).conditional
        return call_refusal(self.access, Item(kind.name, name, backend), principal, method, arguments) if pending \
            else None

    def extends(self, offer: str) -> bool:
        """Whether a backend this tenant uses offers `offer` (an extension, e.g. TASKS_OFFER: no globs filter it)."""
        return any(self.catalogue.offers(b, offer) for b, _ in self.catalogue.order if self.policy.uses(b))

    def offers(self, capability: str) -> bool:
        """Whether this tenant is served `capability` (tools, prompts, resources, completions, logging).

        A backend it may use must have declared it, and the tenant's globs must leave something of
        it visible: a client is not told of prompts it can never list. Completions complete prompt
        and resource-template arguments, so they go with those. Tools are served while a backend the
        tenant uses has not been listed yet (it may declare them: a client told of no tools would
        never list them), or one declared them.
        """
        uses = [b for b, _ in self.catalogue.order if self.policy.uses(b)]
        declared = any(self.catalogue.offers(b, capability) for b in uses)
        if capability == "tools":
            return declared or bool(self.entries) or any(self.catalogue.unknown(b) for b in uses)
        if not declared:
            return False
        if capability == "completions":
            return self.offers("prompts") or self.offers("resources")
        if capability == "logging":
            return True
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

    def __init__(self, *, page_size: int, on_lookup: Callable[[bool], None] | None = None,
                 search: SearchConfig = SEARCH_DEFAULTS) -> None:
        self.page_size = page_size
        self.search = search
        self.on_lookup = on_lookup or (lambda hit: None)  # metrics: hit or miss
        self._version = ""
        self._views: OrderedDict[tuple[str, Access | None, frozenset[str] | None], TenantView] = OrderedDict()

    def clear(self, page_size: int, search: SearchConfig = SEARCH_DEFAULTS) -> None:
        """Drop every view: they were built under tenant policies a reload may have changed."""
        self.page_size, self.search, self._views, self._version = page_size, search, OrderedDict(), ""

    def get(self, catalogue: Catalogue, tenant: TenantConfig, access: Access | None = None,
            traits: frozenset[str] | None = None) -> TenantView:
        """The view of `tenant` for one policy class (None: the tenant's globs alone, no rules), and in a
        catalogue with gated tools for clients with `traits` (None: every tool, for what lists or calls none)."""
        if catalogue.version != self._version:
            self._views, self._version = OrderedDict(), catalogue.version
        traits = traits if catalogue.gated else None
        key = (tenant.name, access, traits)
        view = self._views.get(key)
        # `is`: a request admitted before a reload carries the tenant's old policy, and must not
        # leave its view behind for the requests admitted under the new one (nor use theirs).
        hit = view is not None and view.source is tenant
        self.on_lookup(hit)
        if not hit:
            view = self._views[key] = TenantView(catalogue, tenant, page_size=self.page_size, access=access,
                                                 search=self.search, traits=traits)
            if len(self._views) > MAX_VIEWS:
                self._views.popitem(last=False)
        return view  # type: ignore[return-value]

    def tenants_changed(self, old: Catalogue, new: Catalogue, tenants: Sequence[TenantConfig]) -> list[str]:
        """Tenants who see a tool that was added, removed or changed (for list_changed).

        Only the differing tools are checked against each tenant's policy, so a refresh that
        changed one backend costs that backend's tools, not the whole catalogue per tenant.
        """
        differing = _differing(old, new)
        return [t.name for t in tenants if any(visible(e, t) for e in differing)]

    def changes(self, old: Catalogue, new: Catalogue, tenants: Sequence[TenantConfig]) -> dict[str, Audience]:
        """For each list_changed notification, who hears it: the tenants whose globs let a changed item of
        that kind through, and within them the callers whose rules list it (none: absent)."""
        by_name = {t.name: t for t in tenants}
        tools = ChangedItems(by_name)
        for entry in _differing(old, new):
            for tenant in tenants:
                if visible(entry, tenant):
                    tools.items.setdefault(tenant.name, []).append(Item("tools", entry.exposed, entry.backend))
        changed = {spec.TOOLS_LIST_CHANGED: tools}
        policies = [(t.name, Policy.of(t)) for t in tenants]
        for kind in KINDS:
            differing = _differing_items(old.listings.get(kind.name), new.listings.get(kind.name))
            found = changed.setdefault(kind.list_changed, ChangedItems(by_name))
            for name, policy in policies:
                hit = [Item(kind.name, e.exposed, e.backend) for e in differing
                       if policy.permits(kind.capability, e.backend, e.exposed)]
                if hit:
                    found.items.setdefault(name, []).extend(hit)
        return {method: items.audience() for method, items in changed.items() if items.items}


def policy_changes(old: Catalogue, new: Catalogue, before: Mapping[str, TenantConfig],
                   after: Mapping[str, TenantConfig],
                   searches: tuple[SearchConfig, SearchConfig] = (SEARCH_DEFAULTS, SEARCH_DEFAULTS)
                   ) -> dict[str, Audience]:
    """For each list_changed notification, the clients of tenants whose config a reload changed whose
    view of that kind differs: the old catalogue under the old rules against the new under the new,
    compared once per pair of policy classes, when a client is asked about. `searches`: the
    `catalogue.search` before and after (find_tools' definition in search mode follows it)."""
    searching = searches[0] != searches[1]  # find_tools is defined anew: search mode's clients may hear it
    tenants = [name for name, tenant in after.items() if (previous := before.get(name)) is not None
               and (previous != tenant or (searching and "search" in (previous.discovery, tenant.discovery)))]
    if not tenants:  # a new tenant has no client yet; an unchanged one is the catalogue listener's
        return {}
    compared: dict[tuple[str, Access | None, Access | None], frozenset[str]] = {}

    def differing(name: str, principal: Principal | None) -> frozenset[str]:
        previous, tenant = before[name], after[name]
        classes = (None, None) if principal is None else (previous.policy.access(principal),
                                                          tenant.policy.access(principal))
        methods = compared.get((name, *classes))
        if methods is None:
            views = (TenantView(old, previous, page_size=DIFF_PAGE, access=classes[0], search=searches[0]),
                     TenantView(new, tenant, page_size=DIFF_PAGE, access=classes[1], search=searches[1]))
            methods = compared[(name, *classes)] = frozenset(_kinds_differing(*views))
        return methods

    reload = ReloadAudience(tenants, differing)
    return {method: reload.audience(method) for method in spec.LIST_CHANGED_ORDER}


DIFF_PAGE = 10_000
"""Views built only to be compared: one page is enough."""


def _kinds_differing(old: TenantView, new: TenantView) -> list[str]:
    """The list_changed methods of the kinds whose items differ between two views of one tenant."""
    # in search mode the listed tools may stay while the ones found change (or their shown schemas): either is a change
    tools = old.listed() != new.listed() or old.searched() != new.searched()
    methods = [spec.TOOLS_LIST_CHANGED] if tools else []
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
