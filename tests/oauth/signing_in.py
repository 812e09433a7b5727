"""The official SDK client signing in with OAuth: its `OAuthClientProvider`, a browser played by `Browser`.

`signed_in_client` opens an SDK `Client` on the gateway whose HTTP client carries an
`OAuthClientProvider`: from the first 401 it discovers the metadata, registers itself dynamically,
sends the user through the provider's login and consent pages (the redirect handler records the
authorization URL; the callback handler has `Browser` visit it and reads the code from the
redirect), and exchanges the code with PKCE and the `resource` parameter.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp
import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp_types import ElicitRequestURLParams, ElicitResult

from oauth.authorization_server import AuthorizationServer, Browser, query_of

REDIRECT_URI = "http://127.0.0.1:9/callback"
"""A native client's loopback redirect: the browser stops there and the code is read from the URL."""
TESTER = {"client_id": "tester", "token_endpoint_auth_method": "none", "redirect_uris": ["http://127.0.0.1:9/cb"],
          "grant_types": ["authorization_code"], "response_types": ["code"]}
"""A public client the tests drive by hand, to get tokens the SDK would never ask for (register it)."""


async def user_tokens(provider: AuthorizationServer, user: str, resource: str,
                      scope: str = "mcp:tools") -> dict[str, Any]:
    """The token response of an authorization code flow (PKCE) of TESTER for `resource`, signed in as `user`."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    redirect = TESTER["redirect_uris"][0]
    query = {"response_type": "code", "client_id": "tester", "redirect_uri": redirect, "scope": f"openid {scope}",
             "resource": resource, "code_challenge": challenge, "code_challenge_method": "S256", "state": "s"}
    async with Browser(provider.issuer, user) as browser:
        _, url, _ = await browser.visit(f"{provider.issuer}/auth?{urlencode(query)}", stop_at=redirect)
    form = {"grant_type": "authorization_code", "code": query_of(url)["code"], "client_id": "tester",
            "redirect_uri": redirect, "code_verifier": verifier, "resource": resource}
    async with aiohttp.ClientSession() as http, http.post(provider.token_endpoint, data=form) as response:
        body = await response.json()
    assert "access_token" in body, body
    return dict(body)


@dataclass
class MemoryStorage:
    """The SDK's TokenStorage, in memory; tests read the tokens it was given."""

    tokens: OAuthToken | None = None
    client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


@dataclass
class SignIn:
    """One user's sign-ins through the SDK provider: the authorization URLs it was sent to."""

    issuer: str
    user: str
    storage: MemoryStorage = field(default_factory=MemoryStorage)
    authorizations: list[str] = field(default_factory=list)

    async def redirect(self, url: str) -> None:
        self.authorizations.append(url)

    async def callback(self) -> AuthorizationCodeResult:
        async with Browser(self.issuer, self.user) as browser:
            _, url, _ = await browser.visit(self.authorizations[-1], stop_at=REDIRECT_URI)
        reply = query_of(url)
        assert "code" in reply, f"the provider refused the authorization: {reply}"
        return AuthorizationCodeResult(code=reply["code"], state=reply.get("state"), iss=reply.get("iss"))

    def provider(self, server_url: str, **metadata: Any) -> OAuthClientProvider:
        client_metadata = OAuthClientMetadata(
            client_name="sdk-test-client", redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"], response_types=["code"],
            token_endpoint_auth_method="none", **metadata)
        return OAuthClientProvider(server_url, client_metadata, self.storage, redirect_handler=self.redirect,
                                   callback_handler=self.callback)

    @property
    def scopes(self) -> list[str]:
        """The scopes of each authorization request, in order."""
        return [query_of(url).get("scope", "") for url in self.authorizations]


@asynccontextmanager
async def signed_in_client(url: str, sign_in: SignIn, *, mode: str = "legacy",
                           **client_args: Any) -> AsyncIterator[Client]:
    """The SDK client on `url` (mode "legacy": the handshake era; "auto": 2026-07-28), signing in as needed."""
    http = httpx2.AsyncClient(auth=sign_in.provider(url), timeout=httpx2.Timeout(30, read=60))
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=30,
                            **client_args) as client:
        yield client


class User:
    """A user at a client: the SDK's sign-in to the gateway, and a browser for the backend's authorization."""

    def __init__(self, provider: AuthorizationServer, name: str, *, authorize: bool = True) -> None:
        self.provider = provider
        self.name = name
        self.sign_in = SignIn(provider.issuer, name)
        self.authorize = authorize
        self.asked: list[ElicitRequestURLParams] = []
        self.pages: list[tuple[int, str]] = []
        self.visited: list[str] = []  # every URL the browser went to (the callbacks' codes and states)

    async def elicited(self, context: Any, params: Any) -> ElicitResult:
        assert isinstance(params, ElicitRequestURLParams), params
        self.asked.append(params)
        if not self.authorize:
            return ElicitResult(action="decline")
        await self.open(params.url)
        return ElicitResult(action="accept")

    async def open(self, url: str) -> None:
        async with Browser(self.provider.issuer, self.name) as browser:
            status, _, page = await browser.visit(url)
        self.pages.append((status, page))
        self.visited += browser.visited

    @property
    def token(self) -> str:
        assert self.sign_in.storage.tokens is not None
        return self.sign_in.storage.tokens.access_token
