"""A tenant's prompts, resources and templates: filtered by its policy, paged, and routed.

Like the tools view: built once per tenant and catalogue version, pages pre-encoded, and an
item the tenant may not see looks exactly like one that does not exist.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any

import orjson

from gateway.catalogue.callers import listed_items
from gateway.catalogue.listings import Kind, ListedEntry
from gateway.catalogue.merge import Catalogue
from gateway.catalogue.pages import encode_pages, page_at
from gateway.catalogue.uris import split, template_pattern
from gateway.config import TenantConfig
from gateway.policy import Access, Item
from gateway.protocol.errors import InvalidParams

Globs = tuple[tuple[str, ...], tuple[str, ...]]  # (allow, deny)

MAX_TEMPLATED_URI = 2048
"""Longer URIs are not matched against templates (a bound on regex work per read)."""


@dataclass(frozen=True, slots=True)
class Policy:
    """A tenant's rules for the backends it uses and the prompts and resources it sees."""

    backends: tuple[str, ...]
    prompts: Globs
    resources: Globs  # on gateway URIs and URI templates

    @classmethod
    def of(cls, tenant: TenantConfig) -> Policy:
        return cls(tenant.backends, (tenant.prompts_allow, tenant.prompts_deny),
                   (tenant.resources_allow, tenant.resources_deny))

    def uses(self, backend: str) -> bool:
        return "*" in self.backends or backend in self.backends

    def filters(self, capability: str) -> bool:
        """Whether the globs for `capability` (prompts or resources) can hide anything at all."""
        allow, deny = self.prompts if capability == "prompts" else self.resources
        return bool(deny) or "*" not in allow

    def permits(self, capability: str, backend: str, exposed: str) -> bool:
        """Whether the tenant may see `exposed` (a prompt name, gateway URI or template) of `backend`."""
        if not self.uses(backend):
            return False
        allow, deny = self.prompts if capability == "prompts" else self.resources
        return any(fnmatchcase(exposed, g) for g in allow) and not any(fnmatchcase(exposed, g) for g in deny)


@dataclass(frozen=True, slots=True)
class Route:
    """Where a gateway URI goes: its backend and the backend's own URI."""

    backend: str
    original: str


class ListingView:
    """The items of one kind a tenant sees in one catalogue version."""

    def __init__(self, kind: Kind, catalogue: Catalogue, policy: Policy, view_id: str, *, page_size: int,
                 access: Access | None = None) -> None:
        self.kind = kind
        listing = catalogue.listings.get(kind.name)
        entries = listing.entries if listing else ()
        self.entries = tuple(e for e in entries if policy.permits(kind.capability, e.backend, e.exposed))
        self.conditional: frozenset[str] = frozenset()  # keys listed under a rule that reads the request
        if access is not None and (access.applying or not access.default_allows):
            listed, self.conditional = listed_items(kind.name, self.entries, access)
            self.entries = tuple(listed)
        self.by_key: Mapping[str, ListedEntry] = {e.exposed: e for e in self.entries}
        self.held = frozenset(key for key, backend in catalogue.held_listed.get(kind.name, {}).items()
                              if policy.permits(kind.capability, backend, key)
                              and (access is None or access.decide(Item(kind.name, key, backend)).allowed))
        self.id = hashlib.sha256(f"{view_id}\0{kind.name}".encode()).hexdigest()[:16]
        self.page_size = page_size
        self.pages = encode_pages(self.id, [e.json(kind) for e in self.entries], kind.result_key, page_size)

    def page(self, cursor: Any) -> orjson.Fragment:
        return page_at(self.pages, self.id, self.page_size, cursor)

    def lookup(self, key: Any) -> ListedEntry:
        """The entry for an exposed key; unknown and invisible keys get the same error."""
        entry = self.by_key.get(key) if isinstance(key, str) else None
        if entry is None:
            if isinstance(key, str) and key in self.held:  # one this caller would be shown: nothing more revealed
                raise InvalidParams(f"{self.kind.unknown.removeprefix('Unknown ').capitalize()} held for review: "
                                    f"{key[:200]} (its backend changed its definition or added it, and an admin "
                                    "has not approved it yet)")
            raise InvalidParams(f"{self.kind.unknown}: {str(key)[:200]}")
        return entry


def resolve_uri(catalogue: Catalogue, policy: Policy, resources: ListingView, templates: ListingView,
                uri: str) -> Route | None:
    """The route of a gateway URI for this tenant, or None: a listed URI, then a namespace prefix,
    then a template of an unprefixed backend that matches. The tenant's policy has the last word."""
    route = _listed(resources, uri) or _prefixed(catalogue, uri) or _templated(catalogue, templates, uri)
    if route is None or not catalogue.offers(route.backend, "resources"):
        return None
    return route if policy.permits("resources", route.backend, uri) else None


def _listed(resources: ListingView, uri: str) -> Route | None:
    entry = resources.by_key.get(uri)
    return Route(entry.backend, entry.original) if entry else None


def _prefixed(catalogue: Catalogue, uri: str) -> Route | None:
    parts = split(uri)
    if parts is None or not parts[0]:
        return None
    namespace, original = parts
    backend = next((b for b, ns in catalogue.order if ns == namespace), None)
    return Route(backend, original) if backend else None


def _templated(catalogue: Catalogue, templates: ListingView, uri: str) -> Route | None:
    """Unprefixed backends' URIs carry no namespace: a template of theirs that matches names the owner."""
    unprefixed = {b for b, ns in catalogue.order if not ns}
    if len(uri) > MAX_TEMPLATED_URI or not unprefixed:
        return None
    for entry in templates.entries:
        if entry.backend in unprefixed and _pattern(entry.exposed).fullmatch(uri):
            return Route(entry.backend, uri)
    return None


@lru_cache(maxsize=1024)
def _pattern(template: str) -> Any:
    return template_pattern(template)
