"""`GET /admin/`: the status page, three files shipped in the package (no CDN, no build step).

The page itself holds no data and needs no token: it asks the admin for one, keeps it for the
tab (sessionStorage), and reads the admin JSON endpoints with it. Its files are read once at
start and served with a strict Content-Security-Policy: scripts and styles from this origin
only, no inline script, no frames, no forms posting anywhere, fetches to this origin only.
What backends say (names, descriptions, errors) is only ever inserted as text.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from aiohttp import web

ASSETS = {"index.html": "text/html", "app.js": "text/javascript", "style.css": "text/css"}
"""The page's files (in gateway/admin/static/) and their media types."""

SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",  # revalidated (ETag): a new gateway version's page shows at once
}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    media_type: str
    etag: str

    def reply(self, request: web.Request) -> web.Response:
        headers = {**SECURITY_HEADERS, "ETag": self.etag}
        if request.headers.get("If-None-Match") == self.etag:
            return web.Response(status=304, headers=headers)
        return web.Response(body=self.body, headers={**headers, "Content-Type": f"{self.media_type}; charset=utf-8"})


def load_assets() -> dict[str, Asset]:
    """The page's files from the installed package."""
    folder = resources.files("gateway.admin").joinpath("static")
    assets = {}
    for name, media_type in ASSETS.items():
        body = folder.joinpath(name).read_bytes()
        assets[name] = Asset(body, media_type, f'"{hashlib.sha256(body).hexdigest()[:16]}"')
    return assets


def setup_page_routes(app: web.Application) -> None:
    """`/admin/` (and `/admin`, redirected to it) and the page's script and style sheet."""
    assets = load_assets()

    async def page(request: web.Request) -> web.Response:
        return assets["index.html"].reply(request)

    async def asset(request: web.Request) -> web.Response:
        found = assets.get(request.match_info["name"])
        if found is None or found.media_type == "text/html":
            raise web.HTTPNotFound()
        return found.reply(request)

    async def to_page(request: web.Request) -> web.Response:
        raise web.HTTPPermanentRedirect("admin/")  # relative: it works behind a path prefix too

    app.router.add_get("/admin/", page)
    app.router.add_get("/admin", to_page)
    app.router.add_get("/admin/static/{name}", asset)
