"""Backends that check their tokens at the same authorization server see the identity each `auth` mode gives.

The backend is an official-SDK server verifying RS256 access tokens of oidc-provider for its own
resource (identity_backend.py); its `whoami` tool reports the token it got. With
`client_credentials` it sees the gateway's own client; with `token_exchange` the calling user as
subject (and the gateway as actor when asked), never the caller's own token. Tokens are cached:
the provider counts one grant per user however many calls run at once, and a new one once a token
nears its end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from backend_fixtures import RunningBackend
from conftest import API_KEY, RawClient

from oauth.authorization_server import TOKEN_EXCHANGE, AuthorizationServer, running, settings
from oauth.conftest import GATEWAY_SECRET, Ports, StartOnPort, gateway_client, identity_backend, oauth_gateway_config
from oauth.signing_in import TESTER, user_tokens

pytestmark = pytest.mark.timeout(180)

WHOAMI = {"name": "identity__whoami", "arguments": {}}


@pytest.fixture(scope="module")
def provider(ports: Ports, provider_installed: None) -> Iterator[AuthorizationServer]:
    resources = {ports.resource: {"scope": "mcp:tools"},
                 ports.backend_url: {"scope": "backend:read backend:write", "ttl": 300}}
    config = settings(ports.provider, resources=resources, clients=[gateway_client(ports), TESTER],
                      accounts={"alice": {"tenant": "acme"}, "bob": {"tenant": "acme"}},
                      exchange_audiences=[ports.resource])
    with running(config) as server:
        yield server


async def whoami(client: RawClient) -> dict[str, Any]:
    reply = await client.call("tools/call", WHOAMI)
    assert "result" in reply and not reply["result"].get("isError"), reply
    return dict(reply["result"]["structuredContent"])


async def test_client_credentials_give_the_backend_the_gateways_own_client(
        ports: Ports, provider: AuthorizationServer, identity: RunningBackend, gateway_on: StartOnPort,
        raw_client: Any) -> None:
    config = oauth_gateway_config(ports, [identity_backend(ports, "client_credentials")])
    running_gateway = await gateway_on(config, ports.gateway)  # its catalogue listed the backend with that token
    before = await provider.grants("client_credentials")
    client = raw_client(running_gateway.url, (await user_tokens(provider, "alice", ports.resource))["access_token"])
    await client.initialize()
    seen = [await whoami(client) for _ in range(3)]
    assert seen[0]["sub"] == seen[0]["client_id"] == "gateway" and seen[0]["act"] is None
    assert seen[0]["scope"] == ["backend:read"] and seen[0]["aud"] == ports.backend_url
    assert len({s["jti"] for s in seen}) == 1  # one token, cached
    assert await provider.grants("client_credentials") == before  # the catalogue's fetch got it already


async def test_token_exchange_gives_the_backend_the_calling_user(
        ports: Ports, provider: AuthorizationServer, identity: RunningBackend, gateway_on: StartOnPort,
        raw_client: Any) -> None:
    config = oauth_gateway_config(ports, [identity_backend(ports, "token_exchange", actor=True)])
    running_gateway = await gateway_on(config, ports.gateway)
    caller = (await user_tokens(provider, "alice", ports.resource))["access_token"]
    client = raw_client(running_gateway.url, caller)
    await client.initialize()
    seen = await whoami(client)
    assert (seen["sub"], seen["client_id"], seen["act"]) == ("alice", "gateway", {"sub": "gateway"})
    assert seen["aud"] == ports.backend_url
    assert seen["jti"] != jwt.decode(caller, options={"verify_signature": False})["jti"]  # never the caller's own


async def test_one_exchange_per_user_under_200_concurrent_calls(
        ports: Ports, provider: AuthorizationServer, identity: RunningBackend, gateway_on: StartOnPort,
        raw_client: Any) -> None:
    config = oauth_gateway_config(ports, [identity_backend(ports, "token_exchange")])
    running_gateway = await gateway_on(config, ports.gateway)
    users = {}
    for user in ("alice", "bob"):
        token = (await user_tokens(provider, user, ports.resource))["access_token"]
        users[user] = raw_client(running_gateway.url, token)
        await users[user].initialize()
    before = {user: await provider.grants(TOKEN_EXCHANGE, user) for user in users}
    seen = await asyncio.gather(*(whoami(users["alice" if i % 2 else "bob"]) for i in range(200)))
    assert {s["sub"] for s in seen} == {"alice", "bob"}
    assert {user: await provider.grants(TOKEN_EXCHANGE, user) - before[user] for user in users} == {
        "alice": 1, "bob": 1}
    assert len({s["jti"] for s in seen}) == 2


async def test_a_token_near_its_end_is_fetched_again(
        ports: Ports, provider: AuthorizationServer, identity: RunningBackend, gateway_on: StartOnPort,
        raw_client: Any) -> None:
    # tokens live 300 s; with a margin of 299.5 s they are renewed after half a second
    config = oauth_gateway_config(ports, [identity_backend(ports, "client_credentials")],
                                  oauth={"refresh_margin_seconds": 299.5})
    running_gateway = await gateway_on(config, ports.gateway)
    client = raw_client(running_gateway.url, (await user_tokens(provider, "alice", ports.resource))["access_token"])
    await client.initialize()
    first = await whoami(client)
    await asyncio.sleep(0.6)
    assert (await whoami(client))["jti"] != first["jti"]


async def test_a_refused_exchange_fails_the_call_with_a_clear_reason_and_no_secret(
        ports: Ports, provider: AuthorizationServer, identity: RunningBackend, gateway_on: StartOnPort,
        raw_client: Any) -> None:
    config = oauth_gateway_config(ports, [identity_backend(ports, "token_exchange", scopes=["backend:admin"])])
    running_gateway = await gateway_on(config, ports.gateway)
    caller = (await user_tokens(provider, "alice", ports.resource))["access_token"]
    client = raw_client(running_gateway.url, caller)
    await client.initialize()
    reply = await client.call("tools/call", WHOAMI)
    error = reply["error"]
    assert error["data"] == {"backend": "identity", "reason": "unauthorized"}
    assert error["message"] == "Backend identity is not authorized: token exchange failed: invalid_scope"
    assert GATEWAY_SECRET not in str(reply) and caller not in str(reply)


async def test_an_api_key_caller_has_no_token_to_exchange(
        ports: Ports, provider: AuthorizationServer, identity: RunningBackend, gateway_on: StartOnPort,
        raw_client: Any) -> None:
    config = oauth_gateway_config(ports, [identity_backend(ports, "token_exchange")])
    running_gateway = await gateway_on(config, ports.gateway)
    client = raw_client(running_gateway.url, API_KEY)
    await client.initialize()
    error = (await client.call("tools/call", WHOAMI))["error"]
    assert error["data"]["reason"] == "unauthorized" and "sign in with an OAuth access token" in error["message"]
