"""Users' connections to user_oauth backends, over HTTP: the browser's sign-in, and listing and revoking.

- `GET /oauth/connect/{link}`: where a URL elicitation (or a tool error) sends the user; the link,
  once, starts the authorization at the backend's server (gateway.oauth.flows), after, with
  `oauth.confirm_user`, a sign-in at the gateway's own server that must name the link's user.
- `GET /oauth/callback`: that server's redirect back; the grant is saved for the link's user.
- `GET /oauth/connections`, `DELETE /oauth/connections/{backend}`: a user's own connections, with
  their bearer token (header only); deleting one revokes its tokens at the server (best effort).
- `GET /admin/connections[?tenant=&subject=]`, `DELETE /admin/connections?tenant=&subject=&backend=`:
  every user's, with an admin token.

No page or listing shows a token, a code or a state; the browser pages are not cached, leak no
referrer and cannot be framed.
"""

from __future__ import annotations

import html

import structlog
from aiohttp import web

from gateway import keys
from gateway.admin import require_admin
from gateway.auth.metadata import configured_resource
from gateway.oauth.client import OAuthError
from gateway.oauth.grants import Grant
from gateway.oauth.outbound import BackendCredentials
from gateway.protocol.errors import NotFound, Unauthorized
from gateway.store.health import StoreUnavailable
from gateway.tenancy import resolve_tenant
from gateway.transport.credentials import HeaderCredentials
from gateway.transport.requestlog import PRINCIPAL

log = structlog.get_logger("gateway.oauth")

PAGE_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
                "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"}


async def connect(request: web.Request) -> web.StreamResponse:
    credentials = request.app[keys.CREDENTIALS]
    flows = credentials.flows
    link = request.match_info["link"]
    pending = await flows.pending(link) if flows is not None else None
    auth = credentials.auth_for(pending.backend, pending.tenant) if pending is not None else None
    if flows is None or pending is None or auth is None or auth.mode != "user_oauth":
        return _page(410, "This link has expired or was used already",
                     "Call the tool again from your client: it gives you a new link.")
    try:
        if credentials.confirm is not None:  # who opened it? they sign in at the gateway's own server first
            resource = configured_resource(request.app[keys.CONFIG]) or ""
            url = await flows.confirm(link, credentials.confirm, resource)
        else:
            url = await flows.begin(link, auth, credentials.resource(pending.backend, auth))
    except (OAuthError, StoreUnavailable) as exc:
        log.warning("oauth_connect_failed", backend=pending.backend, reason=getattr(exc, "reason", "store"))
        return _page(502, "The authorization could not be started", "Try again in a moment.")
    raise web.HTTPFound(url, headers=PAGE_HEADERS)


async def callback(request: web.Request) -> web.Response:
    credentials = request.app[keys.CREDENTIALS]
    state, code = request.query.get("state"), request.query.get("code")
    record = await credentials.flows.state(state) if state and credentials.flows is not None else None
    if record is None:
        return _page(400, "Unknown or expired sign-in", "Start again from your client.")
    if record.get("kind") == "confirm":
        return await _confirmed(request, credentials, record, code)
    auth = credentials.auth_for(record["backend"], record["tenant"])
    if "error" in request.query or not code or auth is None:
        return _page(400, f"{record['backend']} was not connected", "The authorization was not given.")
    try:
        await credentials.flows.finish(record, code, auth)  # type: ignore[union-attr]
    except (OAuthError, StoreUnavailable) as exc:
        reason = getattr(exc, "reason", "the token store is unavailable")
        log.warning("oauth_callback_failed", backend=record["backend"], reason=reason)
        return _page(502, f"{record['backend']} was not connected", f"Its authorization server said: {reason}.")
    log.info("oauth_connected", backend=record["backend"], tenant=record["tenant"])
    return _page(200, f"{record['backend']} is connected", "You can close this window and go back to your client.")


async def _confirmed(request: web.Request, credentials: BackendCredentials, record: dict[str, str],
                     code: str | None) -> web.Response:
    """The link's opener signed in at the gateway's own server: on to the backend's if it is the link's user."""
    assert credentials.flows is not None and credentials.confirm is not None
    pending = await credentials.flows.pending(record["link"])
    if pending is None or not code or "error" in request.query:
        return _page(400, "The sign-in was not completed", "Call the tool again from your client.")
    try:
        reply = await credentials.flows.redeem(record, code, credentials.confirm)
        principal = await request.app[keys.EXCHANGE].authenticator.principal_for(reply.access_token)
        auth = credentials.auth_for(pending.backend, pending.tenant)
        if (principal.tenant, principal.subject) != (pending.tenant, pending.subject) or auth is None:
            log.warning("oauth_link_refused", backend=pending.backend, reason="another user opened it")
            return _page(403, "This link was made for someone else", "Ask your own client for a link of your own.")
        url = await credentials.flows.begin(record["link"], auth, credentials.resource(pending.backend, auth))
    except (OAuthError, StoreUnavailable, Unauthorized) as exc:
        log.warning("oauth_confirm_failed", backend=pending.backend, reason=getattr(exc, "reason", type(exc).__name__))
        return _page(403, "Your sign-in could not be confirmed", "Call the tool again from your client.")
    raise web.HTTPFound(url, headers=PAGE_HEADERS)


async def my_connections(request: web.Request) -> web.Response:
    credentials, (tenant, subject) = await _user(request)
    grants = await credentials.grants.of_user(tenant, subject) if credentials.grants is not None else []
    return web.json_response({"connections": [grant.described() for grant in grants]})


async def disconnect(request: web.Request) -> web.Response:
    credentials, (tenant, subject) = await _user(request)
    await _revoke(credentials, tenant, subject, request.match_info["backend"])
    return web.Response(status=204)


async def all_connections(request: web.Request) -> web.Response:
    await require_admin(request)
    credentials = request.app[keys.CREDENTIALS]
    grants = await credentials.grants.every() if credentials.grants is not None else []
    wanted = {key: request.query[key] for key in ("tenant", "subject") if key in request.query}
    return web.json_response({"connections": [_admin_view(grant) for grant in grants
                                              if all(getattr(grant, k) == v for k, v in wanted.items())]})


async def admin_disconnect(request: web.Request) -> web.Response:
    await require_admin(request)
    query = request.query
    if not all(key in query for key in ("tenant", "subject", "backend")):
        raise NotFound("Not Found: name the tenant, subject and backend of the connection")
    await _revoke(request.app[keys.CREDENTIALS], query["tenant"], query["subject"], query["backend"])
    return web.Response(status=204)


async def _user(request: web.Request) -> tuple[BackendCredentials, tuple[str, str]]:
    """The caller (a bearer token in the header, of a configured tenant) and the app's credentials."""
    exchange = request.app[keys.EXCHANGE]
    principal = request[PRINCIPAL] = await exchange.authenticator.authenticate(
        HeaderCredentials(request, request.app[keys.CONFIG]), None)
    resolve_tenant(principal, exchange.tenants)
    return request.app[keys.CREDENTIALS], (principal.tenant, principal.subject)


async def _revoke(credentials: BackendCredentials, tenant: str, subject: str, backend: str) -> None:
    """Delete the grant (404 when there is none), then revoke its tokens at its server, best effort."""
    grant = await credentials.grants.delete(tenant, subject, backend) if credentials.grants is not None else None
    if grant is None:
        raise NotFound(f"Not Found: no connection to {backend[:100]}")
    auth = credentials.auth_for(backend, tenant)
    if auth is None:
        return
    for token, hint in ((grant.refresh_token, "refresh_token"), (grant.access_token, "access_token")):
        if token is None:
            continue
        try:
            revoked = await credentials.servers.revoke(auth, token, hint)
        except OAuthError as exc:
            revoked, hint = False, f"{hint}: {exc.reason}"
        log.info("oauth_disconnected", backend=backend, revoked=revoked, token=hint)


def _admin_view(grant: Grant) -> dict[str, object]:
    return {"tenant": grant.tenant, "subject": grant.subject, **grant.described()}


def _page(status: int, title: str, text: str) -> web.Response:
    body = (f"<!doctype html><html><head><meta charset=utf-8><title>{html.escape(title)}</title></head>"
            f"<body style=\"font-family:sans-serif;max-width:40em;margin:4em auto\"><h1>{html.escape(title)}</h1>"
            f"<p>{html.escape(text)}</p></body></html>")
    return web.Response(status=status, text=body, content_type="text/html", headers=PAGE_HEADERS)


def setup_connection_routes(app: web.Application) -> None:
    app.router.add_get("/oauth/connect/{link}", connect)
    app.router.add_get("/oauth/callback", callback)
    app.router.add_get("/oauth/connections", my_connections)
    app.router.add_delete("/oauth/connections/{backend}", disconnect)
    app.router.add_get("/admin/connections", all_connections)
    app.router.add_delete("/admin/connections", admin_disconnect)
