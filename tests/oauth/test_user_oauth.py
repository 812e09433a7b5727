"""user_oauth: each user authorizes the gateway at the backend's authorization server, once.

The user signs in to the gateway with the SDK's OAuthClientProvider; the first call to the
identity backend finds no grant, so the gateway asks by URL-mode elicitation (2025-11-25 clients:
`elicitation/create`; 2026-07-28 clients: an InputRequiredResult). The client's elicitation
callback plays the user: its browser opens the gateway's link, signs in at the provider, consents,
and comes back to the gateway's callback. The call then goes on, and the backend sees the user's
own grant. Users list and revoke their connections; admins list and revoke anyone's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from conftest import API_KEY

from oauth.authorization_server import AuthorizationServer, running, settings
from oauth.conftest import (
    GATEWAY_SECRET,
    SEAL_KEY,
    Ports,
    StartOnPort,
    gateway_client,
    identity_backend,
    oauth_gateway_config,
)
from oauth.signing_in import TESTER, User, signed_in_client, user_tokens

pytestmark = pytest.mark.timeout(180)

ERAS = ["legacy", "auto"]


@pytest.fixture(scope="module")
def provider(ports: Ports, provider_installed: None) -> Iterator[AuthorizationServer]:
    resources = {ports.resource: {"scope": "mcp:tools"}, ports.backend_url: {"scope": "backend:read", "ttl": 300}}
    config = settings(ports.provider, resources=resources, clients=[gateway_client(ports), TESTER],
                      accounts={"alice": {"tenant": "acme"}, "bob": {"tenant": "acme"}})
    with running(config) as server:
        yield server


def user_oauth_config(ports: Ports, **sections: Any) -> Any:
    backend = identity_backend(ports, "user_oauth", catalogue="client_credentials")
    return oauth_gateway_config(ports, [backend], server={"public_url": ports.resource},
                                oauth={"keys": [SEAL_KEY], **sections.pop("oauth", {})}, **sections)


async def connections(url: str, token: str, method: str = "GET", path: str = "/oauth/connections") -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, \
            http.request(method, url + path, headers={"Authorization": f"Bearer {token}"}) as response:
        return response.status, (await response.json() if response.content_type == "application/json" else None)


@pytest.mark.parametrize("mode", ERAS)
async def test_the_first_call_asks_the_user_to_authorize_and_then_goes_on(
        mode: str, ports: Ports, provider: AuthorizationServer, identity: Any, gateway_on: StartOnPort) -> None:
    running_gateway = await gateway_on(user_oauth_config(ports), ports.gateway)
    alice = User(provider, "alice")
    async with signed_in_client(running_gateway.url, alice.sign_in, mode=mode,
                                elicitation_callback=alice.elicited) as client:
        first = await client.call_tool("identity__whoami", {})
        again = await client.call_tool("identity__whoami", {})
    assert first.structured_content is not None and not first.is_error
    assert (first.structured_content["sub"], first.structured_content["client_id"]) == ("alice", "gateway")
    assert again.structured_content == first.structured_content  # the same grant, asked for once
    (asked,) = alice.asked
    assert asked.url.startswith(f"http://127.0.0.1:{ports.gateway}/oauth/connect/")  # the gateway's, not the AS's
    assert alice.pages == [(200, alice.pages[0][1])] and "identity is connected" in alice.pages[0][1]
    status, listed = await connections(running_gateway.base.rstrip("/"), alice.token)
    assert status == 200
    (connection,) = listed["connections"]
    assert (connection["backend"], connection["scope"], connection["refreshable"]) == ("identity", "backend:read", True)
    assert "token" not in str(listed).replace("refreshable", "")


async def test_a_client_that_cannot_be_asked_gets_the_link_in_a_tool_error(
        ports: Ports, provider: AuthorizationServer, identity: Any, gateway_on: StartOnPort) -> None:
    running_gateway = await gateway_on(user_oauth_config(ports), ports.gateway)
    bob = User(provider, "bob")
    async with signed_in_client(running_gateway.url, bob.sign_in) as client:  # no elicitation callback
        refused = await client.call_tool("identity__whoami", {})
        assert refused.is_error
        text = refused.content[0].text  # type: ignore[union-attr]
        link = next(word for word in text.split() if "/oauth/connect/" in word)
        await bob.open(link)
        done = await client.call_tool("identity__whoami", {})
    assert done.structured_content is not None and done.structured_content["sub"] == "bob"
    await bob.open(link)  # a link works once
    assert bob.pages[-1][0] == 410


async def test_a_declined_authorization_is_a_tool_error(
        ports: Ports, provider: AuthorizationServer, identity: Any, gateway_on: StartOnPort) -> None:
    running_gateway = await gateway_on(user_oauth_config(ports), ports.gateway)
    alice = User(provider, "alice", authorize=False)
    async with signed_in_client(running_gateway.url, alice.sign_in, elicitation_callback=alice.elicited) as client:
        refused = await client.call_tool("identity__whoami", {})
    assert refused.is_error and "declined" in refused.content[0].text  # type: ignore[union-attr]


async def test_a_revoked_connection_stops_working(
        ports: Ports, provider: AuthorizationServer, identity: Any, gateway_on: StartOnPort) -> None:
    running_gateway = await gateway_on(user_oauth_config(ports), ports.gateway)
    base = running_gateway.base.rstrip("/")
    alice = User(provider, "alice")
    async with signed_in_client(running_gateway.url, alice.sign_in, elicitation_callback=alice.elicited) as client:
        assert not (await client.call_tool("identity__whoami", {})).is_error
        revoked_before = (await provider.counters())["grants"].get("revoked", 0)
        assert (await connections(base, alice.token, "DELETE", "/oauth/connections/identity"))[0] == 204
        assert (await provider.counters())["grants"].get("revoked", 0) > revoked_before  # revoked at the server
        assert (await connections(base, alice.token))[1] == {"connections": []}
        assert (await connections(base, alice.token, "DELETE", "/oauth/connections/identity"))[0] == 404
        alice.authorize = False
        refused = await client.call_tool("identity__whoami", {})
    assert refused.is_error and len(alice.asked) == 2  # asked again: the grant is gone


async def test_admins_list_and_revoke_every_users_connections(
        ports: Ports, provider: AuthorizationServer, identity: Any, gateway_on: StartOnPort) -> None:
    running_gateway = await gateway_on(user_oauth_config(ports), ports.gateway)
    base = running_gateway.base.rstrip("/")
    alice = User(provider, "alice")
    async with signed_in_client(running_gateway.url, alice.sign_in, elicitation_callback=alice.elicited) as client:
        assert not (await client.call_tool("identity__whoami", {})).is_error
    bob_token = (await user_tokens(provider, "bob", ports.resource))["access_token"]
    assert (await connections(base, bob_token, path="/admin/connections"))[0] == 403  # no admin scope
    status, listed = await connections(base, API_KEY, path="/admin/connections?tenant=acme&subject=alice")
    assert status == 200
    assert [(c["tenant"], c["subject"], c["backend"]) for c in listed["connections"]] == [("acme", "alice", "identity")]
    path = "/admin/connections?tenant=acme&subject=alice&backend=identity"
    assert (await connections(base, API_KEY, "DELETE", path))[0] == 204
    assert (await connections(base, alice.token))[1] == {"connections": []}


async def test_an_expiring_grant_is_refreshed_once_for_concurrent_calls(
        ports: Ports, provider: AuthorizationServer, identity: Any, gateway_on: StartOnPort) -> None:
    # grants live 300 s; with a margin of 296 s they are refreshed after 4 s (time enough for 20 calls)
    running_gateway = await gateway_on(user_oauth_config(ports, oauth={"refresh_margin_seconds": 296}),
                                       ports.gateway)
    alice = User(provider, "alice")
    async with signed_in_client(running_gateway.url, alice.sign_in, elicitation_callback=alice.elicited) as client:
        first = await client.call_tool("identity__whoami", {})
        refreshed = await provider.grants("refresh_token", "alice")
        await asyncio.sleep(4.1)
        seen = await asyncio.gather(*(client.call_tool("identity__whoami", {}) for _ in range(20)))
    assert await provider.grants("refresh_token", "alice") == refreshed + 1
    assert {s.structured_content["jti"] for s in seen} - {first.structured_content["jti"]}  # type: ignore[index]
    assert len(alice.asked) == 1


async def test_with_confirm_user_only_the_links_own_user_can_use_it(
        ports: Ports, provider: AuthorizationServer, identity: Any, gateway_on: StartOnPort) -> None:
    confirm = {"client_id": "gateway", "client_secret": GATEWAY_SECRET, "scopes": ["mcp:tools"]}
    running_gateway = await gateway_on(user_oauth_config(ports, oauth={"confirm_user": confirm}), ports.gateway)
    alice, bob = User(provider, "alice"), User(provider, "bob")
    async with signed_in_client(running_gateway.url, alice.sign_in) as client:  # gets the link in a tool error
        refused = await client.call_tool("identity__whoami", {})
        text = refused.content[0].text  # type: ignore[union-attr]
        link = next(word for word in text.split() if "/oauth/connect/" in word)
        await bob.open(link)  # passed to bob: he signs in as himself at the gateway's server, and is stopped
        assert bob.pages[-1][0] == 403 and "made for someone else" in bob.pages[-1][1]
        await alice.open(link)  # the link's own user: on to the backend's authorization
        assert alice.pages[-1][0] == 200 and "identity is connected" in alice.pages[-1][1]
        done = await client.call_tool("identity__whoami", {})
    assert done.structured_content is not None and done.structured_content["sub"] == "alice"


async def test_the_oauth_endpoints_refuse_bad_input_cleanly(
        ports: Ports, provider: AuthorizationServer, gateway_on: StartOnPort) -> None:
    running_gateway = await gateway_on(user_oauth_config(ports), ports.gateway)
    base = running_gateway.base.rstrip("/")
    alice_token = (await user_tokens(provider, "alice", ports.resource))["access_token"]
    async with aiohttp.ClientSession() as http:
        for path, status in (("/oauth/callback", 400), ("/oauth/callback?state=forged&code=stolen", 400),
                             ("/oauth/callback?error=access_denied&state=x", 400), ("/oauth/connect/forged", 410),
                             ("/oauth/connect/" + "x" * 5000, 410)):
            async with http.get(base + path, allow_redirects=False) as response:
                assert response.status == status, path
                assert response.headers["Cache-Control"] == "no-store"
                assert response.headers["Referrer-Policy"] == "no-referrer"
                assert "stolen" not in await response.text()
        async with http.get(base + "/oauth/connections") as response:
            assert response.status == 401 and "resource_metadata=" in response.headers["WWW-Authenticate"]
        async with http.get(f"{base}/oauth/connections?token={alice_token}") as response:
            assert response.status == 401  # the header only
    assert (await connections(base, alice_token, "DELETE", "/oauth/connections/nothing"))[0] == 404
    assert (await connections(base, alice_token, path="/admin/connections"))[0] == 403
    assert (await connections(base, API_KEY, "DELETE", "/admin/connections?tenant=acme"))[0] == 404
