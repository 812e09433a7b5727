"""The gateway's HTTP client for authorization servers: metadata, token requests, revocation.

Endpoints come from a backend's `auth` or from its issuer's metadata (RFC 8414, then OpenID
discovery), which must name that issuer; every endpoint is https (http only on loopback).
Token requests authenticate the gateway's client (RFC 6749 §2.3.1, basic or post) and read
the reply into a `TokenReply`, whose tokens never appear in its repr. A refusal or a failure is
an `OAuthError` whose `reason` is safe to show and log: the server's own error code (RFC 6749
§5.2: `invalid_grant`, ...), or `unreachable`, `timeout`, `bad_response`.
"""

from __future__ import annotations

import asyncio
import base64
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp
import orjson

from gateway.config import BackendAuth
from gateway.config.backend_http import check_jwks_url

MAX_REPLY_BYTES = 64 * 1024
METADATA_SECONDS = 3600.0
"""How long an issuer's metadata is trusted before it is fetched again."""
ERROR_CODE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
"""What an error code may look like to be repeated (RFC 6749 §5.2 codes are plain ASCII words)."""


class OAuthError(Exception):
    """An authorization server refused, or could not be asked; `reason` names why without a secret."""

    def __init__(self, reason: str, *, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


@dataclass(frozen=True, slots=True)
class Endpoints:
    token: str
    authorization: str | None = None
    revocation: str | None = None


@dataclass(frozen=True, slots=True)
class TokenReply:
    """A token endpoint's answer; `expires_at` in epoch seconds, None when the server said nothing."""

    access_token: str = field(repr=False)
    expires_at: float | None = None
    refresh_token: str | None = field(default=None, repr=False)
    scope: str | None = None


class AuthorizationServers:
    """Talks to the authorization servers of every backend (one HTTP client, metadata cached)."""

    def __init__(self, *, timeout: float, clock: Callable[[], float] = time.time) -> None:
        self.timeout = timeout
        self.clock = clock
        self._metadata: dict[str, tuple[float, dict[str, Any]]] = {}
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def endpoints(self, auth: BackendAuth) -> Endpoints:
        """The endpoints `auth` names, the rest from its issuer's metadata."""
        metadata = await self._issuer_metadata(auth.issuer) if auth.issuer else {}
        token = auth.token_url or _endpoint(metadata, "token_endpoint")
        if token is None:
            raise OAuthError("no_token_endpoint")
        return Endpoints(token, auth.authorization_url or _endpoint(metadata, "authorization_endpoint"),
                         auth.revocation_url or _endpoint(metadata, "revocation_endpoint"))

    async def token(self, auth: BackendAuth, form: dict[str, str]) -> TokenReply:
        """POST `form` to the token endpoint as the gateway's client; the token it answers with."""
        endpoints = await self.endpoints(auth)
        headers, body = _client_auth(auth, form)
        status, reply = await self._post(endpoints.token, body, headers)
        if status != 200 or not isinstance(reply, dict):
            raise OAuthError(_error_code(reply) or f"http_{status}", status=status)
        return self._reply(reply)

    async def revoke(self, auth: BackendAuth, token: str, hint: str) -> bool:
        """RFC 7009, best effort: whether the server took it (no revocation endpoint: False)."""
        endpoints = await self.endpoints(auth)
        if endpoints.revocation is None:
            return False
        headers, body = _client_auth(auth, {"token": token, "token_type_hint": hint})
        status, _ = await self._post(endpoints.revocation, body, headers)
        return status == 200

    def _reply(self, reply: dict[str, Any]) -> TokenReply:
        access, lifetime = reply.get("access_token"), reply.get("expires_in")
        if not isinstance(access, str) or not access or str(reply.get("token_type", "")).lower() not in (
                "bearer", "n_a", ""):  # RFC 8693 §2.2.1: N_A for a token that is not an access token
            raise OAuthError("bad_response")
        expires = self.clock() + float(lifetime) if isinstance(lifetime, int | float) and lifetime > 0 else None
        refresh, scope = reply.get("refresh_token"), reply.get("scope")
        return TokenReply(access, expires, refresh if isinstance(refresh, str) else None,
                          scope if isinstance(scope, str) else None)

    async def _issuer_metadata(self, issuer: str) -> dict[str, Any]:
        cached = self._metadata.get(issuer)
        if cached is not None and self.clock() - cached[0] < METADATA_SECONDS:
            return cached[1]
        for url in _metadata_urls(issuer):
            status, document = await self._get(url)
            if status == 200 and isinstance(document, dict):
                if document.get("issuer") != issuer:  # RFC 8414 §3.3: it must be this issuer's
                    raise OAuthError("issuer_mismatch")
                self._metadata[issuer] = (self.clock(), document)
                return document
        raise OAuthError("no_metadata")

    async def _get(self, url: str) -> tuple[int, Any]:
        return await self._send("GET", url, None, {"Accept": "application/json"})

    async def _post(self, url: str, form: dict[str, str], headers: dict[str, str]) -> tuple[int, Any]:
        return await self._send("POST", url, form, {"Accept": "application/json", **headers})

    async def _send(self, method: str, url: str, form: dict[str, str] | None,
                    headers: dict[str, str]) -> tuple[int, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        try:
            async with self._session.request(method, url, data=form, headers=headers,
                                             allow_redirects=False) as response:
                body = await response.content.read(MAX_REPLY_BYTES + 1)
                status = response.status
        except TimeoutError:
            raise OAuthError("timeout") from None
        except (aiohttp.ClientError, OSError, asyncio.IncompleteReadError):
            raise OAuthError("unreachable") from None
        if len(body) > MAX_REPLY_BYTES:
            raise OAuthError("bad_response", status=status)
        try:
            return status, orjson.loads(body)
        except orjson.JSONDecodeError:
            return status, None


def targeted(form: dict[str, str], resource: str, auth: BackendAuth | None) -> dict[str, str]:
    """`form` with what it is for: the RFC 8707 resource (none when ""), and the `audience` and scope of `auth`."""
    if resource:
        form["resource"] = resource
    if auth is not None and auth.audience:
        form["audience"] = auth.audience
    if auth is not None and auth.scopes:
        form["scope"] = " ".join(auth.scopes)
    return form


def _client_auth(auth: BackendAuth, form: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The headers and form that authenticate the gateway's client (RFC 6749 §2.3.1)."""
    if auth.client_secret is None:  # a public client names itself
        return {}, {**form, "client_id": auth.client_id}
    if auth.client_auth == "client_secret_post":
        return {}, {**form, "client_id": auth.client_id, "client_secret": auth.client_secret}
    pair = f"{quote(auth.client_id, safe='')}:{quote(auth.client_secret, safe='')}"
    return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}, form


def _error_code(reply: Any) -> str | None:
    code = reply.get("error") if isinstance(reply, dict) else None
    return code if isinstance(code, str) and ERROR_CODE.fullmatch(code) else None


def _endpoint(metadata: dict[str, Any], name: str) -> str | None:
    url = metadata.get(name)
    if not isinstance(url, str):
        return None
    try:
        check_jwks_url(url)  # the same rule as configured ones: https, or http on loopback
    except ValueError:
        raise OAuthError("insecure_endpoint") from None
    return url


def _metadata_urls(issuer: str) -> list[str]:
    """RFC 8414 §3.1 (path inserted), then OpenID discovery inserted and appended (RFC 8414 §5)."""
    parts = urlsplit(issuer)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    return list(dict.fromkeys([f"{origin}/.well-known/oauth-authorization-server{path}",
                               f"{origin}/.well-known/openid-configuration{path}",
                               f"{issuer.rstrip('/')}/.well-known/openid-configuration"]))
