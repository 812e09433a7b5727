"""`GET /admin/catalogue?tenant=T[&subject=S&groups=a,b&scopes=x y&claims={…}][&q=…][&kind=…][&limit=N]`.

What one tenant sees, or with a caller named (any of `subject`, `groups`, `scopes`, `claims`)
what that caller sees under the per-caller policy: the very view its clients are served (so a
glob, a rule, a collision or a rename shows exactly as they see it), each item with its backend,
its original name or URI and, for a caller, the rule that lists it (and whether a condition on
the call may still refuse it). `q` matches, case-insensitively, anywhere in the exposed name, the
original, the backend, the title or the description; `kind` narrows to tools, prompts, resources
or templates.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
from aiohttp import web

from gateway import keys
from gateway.admin.access import admin_json, require_admin
from gateway.catalogue.listings import KINDS
from gateway.catalogue.views import TenantView
from gateway.config import TenantConfig
from gateway.policy import Access, Principal
from gateway.policy import Item as PolicyItem
from gateway.protocol.errors import BadRequest, NotFound

KIND_NAMES = ("tools", *(kind.name for kind in KINDS))
DEFAULT_LIMIT, MAX_LIMIT = 200, 2000
"""Items returned at most (the total matched is always given)."""
MAX_QUERY = 200
TEXT_CHARS = 500
"""A description is shown up to this long."""
MAX_CALLER = 4096
"""The longest `subject`, `groups`, `scopes` or `claims` accepted."""
CALLER_KEYS = ("subject", "groups", "scopes", "claims")

Item = dict[str, Any]


async def catalogue(request: web.Request) -> web.Response:
    await require_admin(request)
    tenant = request.app[keys.EXCHANGE].tenants.get(request.query.get("tenant", ""))
    if tenant is None:
        raise NotFound("Not Found: no such tenant" if request.query.get("tenant") else
                       "Not Found: name a tenant (?tenant=)")
    query, kinds, limit = _query(request)
    caller = _caller(request, tenant)
    view = request.app[keys.CATALOGUE].view(tenant, caller)
    access = tenant.policy.access(caller) if caller is not None else None
    matched = [_ruled(item, access) for item in _items(view, kinds) if _matches(item, query)]
    return admin_json({"tenant": tenant.name, "caller": _described(caller), "catalogue_version": view.catalogue_version,
                       "query": query, "kinds": list(kinds), "total": len(matched), "items": matched[:limit]})


def _caller(request: web.Request, tenant: TenantConfig) -> Principal | None:
    """The caller named by the query, if any: a principal of `tenant` as a token would make it."""
    given = {key: request.query[key] for key in CALLER_KEYS if key in request.query}
    if not given:
        return None
    if any(len(value) > MAX_CALLER for value in given.values()):
        raise BadRequest(f"Bad Request: subject, groups, scopes and claims are at most {MAX_CALLER} characters")
    try:
        claims = orjson.loads(given.get("claims") or "{}")
    except orjson.JSONDecodeError:
        claims = None
    if not isinstance(claims, dict):
        raise BadRequest("Bad Request: claims must be a JSON object")
    return Principal(tenant=tenant.name, subject=given.get("subject", ""), claims=claims,
                     groups=_names(given.get("groups", "")), scopes=_names(given.get("scopes", "")))


def _names(value: str) -> frozenset[str]:
    """Names separated by commas or spaces."""
    return frozenset(value.replace(",", " ").split())


def _described(caller: Principal | None) -> dict[str, Any] | None:
    if caller is None:
        return None
    return {"subject": caller.subject, "groups": sorted(caller.groups), "scopes": sorted(caller.scopes),
            "claims": dict(caller.claims)}


def _ruled(item: Item, access: Access | None) -> Item:
    """The item with the rule that lists it to the caller (none for a tenant's view)."""
    if access is None:
        return item
    decision = access.decide(PolicyItem(item["kind"], item["name"], item["backend"]))
    return {**item, "rule": decision.rule_name, "conditional": decision.conditional}


def _query(request: web.Request) -> tuple[str, tuple[str, ...], int]:
    query = request.query.get("q", "").strip().lower()
    if len(query) > MAX_QUERY:
        raise BadRequest(f"Bad Request: q is longer than {MAX_QUERY} characters")
    kind = request.query.get("kind", "all")
    if kind != "all" and kind not in KIND_NAMES:
        raise BadRequest(f"Bad Request: kind must be all or one of {', '.join(KIND_NAMES)}")
    raw = request.query.get("limit", str(DEFAULT_LIMIT))
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise BadRequest(f"Bad Request: limit must be a whole number from 1 to {MAX_LIMIT}")
    return query, KIND_NAMES if kind == "all" else (kind,), int(raw)


def _items(view: TenantView, kinds: tuple[str, ...]) -> Iterator[Item]:
    if "tools" in kinds:
        for entry in view.entries:
            yield _item("tools", entry.exposed, entry.backend, entry.original, entry.decoded())
    for kind in KINDS:
        if kind.name in kinds:
            for listed in view.listing(kind).entries:
                yield _item(kind.name, listed.exposed, listed.backend, listed.original, listed.item.decoded(kind))


def _item(kind: str, exposed: str, backend: str, original: str, fields: dict[str, Any]) -> Item:
    title = fields.get("title") or (fields.get("name") if kind in ("resources", "templates") else None)
    description = fields.get("description")
    return {"kind": kind, "name": exposed, "backend": backend, "original": original,
            "title": title if isinstance(title, str) else None,
            "description": description[:TEXT_CHARS] if isinstance(description, str) else None}


def _matches(item: Item, query: str) -> bool:
    if not query:
        return True
    return any(query in value.lower() for key in ("name", "original", "backend", "title", "description")
               if isinstance(value := item[key], str))
