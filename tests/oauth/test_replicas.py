"""Two replicas on one Redis share the gateway's tokens and users' grants; a restart keeps the grants.

Both replicas serve one public URL (a load balancer's), so a token for it is good at either. The
provider counts what the gateway asks for: a client-credentials token and a user's exchanged token
are fetched by one replica and used by the other; a user who authorized through one replica is
served by the other, and by a restarted replica, without being asked again.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from oauth.authorization_server import TOKEN_EXCHANGE, AuthorizationServer
from oauth.conftest import SEAL_KEY, Ports, StartOnPort, identity_backend, oauth_gateway_config
from oauth.signing_in import User, signed_in_client, user_tokens

pytestmark = pytest.mark.timeout(180)

WHOAMI = {"name": "identity__whoami", "arguments": {}}


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    prefix = f"mcpgw-test-{os.urandom(8).hex()}:"
    yield prefix
    client = aioredis.Redis.from_url("redis://127.0.0.1:6379")
    async for key in client.scan_iter(match=f"{prefix}*"):
        await client.delete(key)
    await client.aclose()


def replica_config(ports: Ports, prefix: str, mode: str) -> Any:
    backend = identity_backend(ports, mode, **({"catalogue": "client_credentials"} if mode == "user_oauth" else {}))
    return oauth_gateway_config(ports, [backend], server={"public_url": ports.resource},
                                store={"redis_url": "redis://127.0.0.1:6379", "key_prefix": prefix},
                                oauth={"keys": [SEAL_KEY]})


async def whoami(client: Any) -> dict[str, Any]:
    reply = await client.call("tools/call", WHOAMI)
    assert "result" in reply and not reply["result"].get("isError"), reply
    return dict(reply["result"]["structuredContent"])


async def test_the_replicas_share_the_gateways_own_token(
        ports: Ports, provider: AuthorizationServer, identity: Any, gateway_on: StartOnPort, prefix: str,
        raw_client: Any) -> None:
    before = await provider.grants("client_credentials")
    one = await gateway_on(replica_config(ports, prefix, "client_credentials"), ports.gateway)
    two = await gateway_on(replica_config(ports, prefix, "client_credentials"), ports.replica)
    token = (await user_tokens(provider, "alice", ports.resource))["access_token"]
    seen = []
    for replica in (one, two):
        client = raw_client(replica.url, token)
        await client.initialize()
        seen.append(await whoami(client))
    assert seen[0]["jti"] == seen[1]["jti"]  # the same token, from Redis
    assert await provider.grants("client_credentials") - before == 1  # both catalogues and both calls: one token


async def test_the_replicas_share_a_users_exchanged_token(
        ports: Ports, provider: AuthorizationServer, identity: Any, gateway_on: StartOnPort, prefix: str,
        raw_client: Any) -> None:
    one = await gateway_on(replica_config(ports, prefix, "token_exchange"), ports.gateway)
    two = await gateway_on(replica_config(ports, prefix, "token_exchange"), ports.replica)
    token = (await user_tokens(provider, "alice", ports.resource))["access_token"]
    before = await provider.grants(TOKEN_EXCHANGE, "alice")
    seen = []
    for replica in (one, two, one):
        client = raw_client(replica.url, token)
        await client.initialize()
        seen.append(await whoami(client))
    assert {s["sub"] for s in seen} == {"alice"} and len({s["jti"] for s in seen}) == 1
    assert await provider.grants(TOKEN_EXCHANGE, "alice") - before == 1


async def test_a_grant_given_through_one_replica_serves_the_other_and_outlives_a_restart(
        ports: Ports, provider: AuthorizationServer, identity: Any, gateway_on: StartOnPort, prefix: str,
        raw_client: Any) -> None:
    one = await gateway_on(replica_config(ports, prefix, "user_oauth"), ports.gateway)
    two = await gateway_on(replica_config(ports, prefix, "user_oauth"), ports.replica)
    alice = User(provider, "alice")
    async with signed_in_client(one.url, alice.sign_in, elicitation_callback=alice.elicited) as client:
        first = await client.call_tool("identity__whoami", {})
    assert first.structured_content is not None and first.structured_content["sub"] == "alice"
    on_two = raw_client(two.url, alice.token)
    await on_two.initialize()
    assert (await whoami(on_two))["jti"] == first.structured_content["jti"]  # her grant, not asked again
    await one.server.close()
    restarted = await gateway_on(replica_config(ports, prefix, "user_oauth"), ports.gateway)
    again = raw_client(restarted.url, alice.token)
    await again.initialize()
    assert (await whoami(again))["sub"] == "alice"
    assert len(alice.asked) == 1
