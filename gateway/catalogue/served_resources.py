"""A virtual server's resources and resource templates: which stand, what one caller is listed, what it reads.

An item names the backend's own URI (or template), or a glob over them; the server lists each under its
gateway URI (`<namespace>+<uri>`), which the backend's config alone decides, so contents, links and
subscriptions need nothing of their own. An exact item whose source the backend no longer lists is
withdrawn (`missing`), as a tool is; a glob takes whatever matches now and is never withdrawn.

What a caller is listed is the caller's own view (tenant globs, rules) narrowed to the server's items. A
caller reads a URI through the server when its own view routes it (catalogue.listviews.resolve_uri) and
the server takes the route: an item covers the backend's URI, or one of the server's listed templates
expands to it. Anything else is unknown, with the error a URI nobody serves gets on `/mcp`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import orjson

from gateway.catalogue.listings import RESOURCES, TEMPLATES, Kind, ListedEntry
from gateway.catalogue.listviews import Route
from gateway.catalogue.merge import Catalogue
from gateway.catalogue.pages import encode_pages, page_at
from gateway.catalogue.uris import template_pattern
from gateway.config.server_model import ServedResource, ServedTemplate, VirtualServer

Served = ServedResource | ServedTemplate


def absent_sources(server: VirtualServer, catalogue: Catalogue) -> Iterator[tuple[str, Served]]:
    """(kind, item) for each exact resource or template item whose source `catalogue` does not list."""
    kinds: tuple[tuple[Kind, tuple[Served, ...]], ...] = (
        (RESOURCES, server.resources), (TEMPLATES, server.templates))
    for kind, items in kinds:
        exact = [item for item in items if not item.glob]
        if not exact:
            continue
        listing = catalogue.listings.get(kind.name)
        listed = {(e.backend, e.original) for e in listing.entries} if listing else set()
        yield from ((kind.name, item) for item in exact if (item.backend, item.source) not in listed)


class ServedResources:
    """The resources and templates one caller class is listed by one server in one catalogue version."""

    def __init__(self, server: VirtualServer, view: Any, withdrawn: Iterable[tuple[str, str]], view_id: str) -> None:
        """`view`: the caller's TenantView; `withdrawn`: the (kind, name) of the server's items that do not stand."""
        gone = set(withdrawn)
        self.items = tuple(i for i in server.resources if ("resources", i.name) not in gone)
        standing_templates = tuple(i for i in server.templates if ("templates", i.name) not in gone)
        self.page_size = view.page_size
        self.ids = (f"{view_id}r", f"{view_id}t")
        resources = _covered(self.items, view.listing(RESOURCES).entries) if self.items else []
        templates = _covered(standing_templates, view.listing(TEMPLATES).entries) if standing_templates else []
        self.pages = encode_pages(self.ids[0], [_json(RESOURCES, i, e) for i, e in resources], "resources",
                                  self.page_size)
        self.template_pages = encode_pages(self.ids[1], [_json(TEMPLATES, i, e) for i, e in templates],
                                           "resourceTemplates", self.page_size)
        self.templates: Mapping[str, ListedEntry] = {e.exposed: e for _, e in templates}
        self._patterns = [(e.backend, template_pattern(e.exposed)) for e in self.templates.values()]

    def page(self, cursor: Any) -> orjson.Fragment:
        return page_at(self.pages, self.ids[0], self.page_size, cursor)

    def template_page(self, cursor: Any) -> orjson.Fragment:
        return page_at(self.template_pages, self.ids[1], self.page_size, cursor)

    def reads(self, uri: str, route: Route) -> bool:
        """Whether the server takes a URI the caller's own view routes to `route`."""
        if any(item.covers(route.backend, route.original) for item in self.items):
            return True
        return any(backend == route.backend and pattern.fullmatch(uri) for backend, pattern in self._patterns)


def _covered(items: tuple[Served, ...], entries: Iterable[ListedEntry]) -> list[tuple[Served, ListedEntry]]:
    """Each listed entry some item takes, with the first such item (its overrides), in the items' order."""
    entries = tuple(entries)
    taken: dict[str, tuple[Served, ListedEntry]] = {}
    for item in items:
        for entry in entries:
            if entry.exposed not in taken and item.covers(entry.backend, entry.original):
                taken[entry.exposed] = (item, entry)
    return list(taken.values())


def _json(kind: Kind, item: Served, entry: ListedEntry) -> bytes:
    """The source as the server lists it: its gateway URI, retitled and redescribed."""
    if item.title is None and item.description is None:
        return entry.json(kind)
    listed = orjson.loads(entry.json(kind))
    if item.title is not None:
        listed["title"] = item.title
    if item.description is not None:
        listed["description"] = item.description
    return orjson.dumps(listed)

