"""Signing in as the MCP authorization spec says, with the official SDK client and a real authorization server.

The gateway is an OAuth resource server in front of oidc-provider: the SDK's OAuthClientProvider
starts from a bare 401, reads the protected-resource metadata, registers itself, sends the user
through the provider's pages, and calls tools with the token, in both protocol eras. Tokens the
provider minted for something else (another resource, the bare origin, an ID token) are refused,
and a call needing a scope the token lacks gets 403 `insufficient_scope`, from which the SDK
steps up.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import aiohttp
import jwt
import pytest
from conftest import MCP_HEADERS

from gateway.protocol import spec
from oauth.authorization_server import AuthorizationServer, query_of, running, settings
from oauth.conftest import Ports, StartOnPort, oauth_gateway_config
from oauth.signing_in import TESTER, SignIn, signed_in_client, user_tokens

pytestmark = pytest.mark.timeout(120)

ERAS = ["legacy", "auto"]
"""The SDK client's modes: the handshake era (initialize), and 2026-07-28 (server/discover)."""
CALC = {"name": "calc", "transport": "stdio", "command": ["python", "-m", "gateway.demo.calc"]}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "1"}}}


def other_resource(ports: Ports) -> str:
    return f"http://127.0.0.1:{ports.replica}/mcp"


@pytest.fixture(scope="module")
def provider(ports: Ports, provider_installed: None) -> Iterator[AuthorizationServer]:
    origin = f"http://127.0.0.1:{ports.gateway}"
    resources = {ports.resource: {"scope": "mcp:tools mcp:secret"}, other_resource(ports): {"scope": "mcp:tools"},
                 origin: {"scope": "mcp:tools"}}
    with running(settings(ports.provider, resources=resources, clients=[TESTER],
                          accounts={"alice": {"tenant": "acme"}})) as server:
        yield server


async def post(url: str, token: str | None = None, *, query: str = "") -> tuple[int, Any, Any]:
    headers = dict(MCP_HEADERS, **({"Authorization": f"Bearer {token}"} if token else {}))
    async with aiohttp.ClientSession() as http, http.post(url + query, json=INITIALIZE, headers=headers) as response:
        return response.status, await response.read(), response.headers


# ---------------------------------------------------------------- signing in


@pytest.mark.parametrize("mode", ERAS)
async def test_the_sdk_client_signs_in_from_a_bare_401_and_calls_a_tool(
        mode: str, ports: Ports, provider: AuthorizationServer, gateway_on: StartOnPort) -> None:
    # the default resource metadata: no scopes_supported (an empty list would make clients ask for no scope)
    running_gateway = await gateway_on(oauth_gateway_config(ports, [CALC]), ports.gateway)
    sign_in = SignIn(provider.issuer, "alice")
    async with signed_in_client(running_gateway.url, sign_in, mode=mode) as client:
        result = await client.call_tool("calc__add", {"a": 2, "b": 3})
    assert result.structured_content == {"result": 5}
    assert len(sign_in.authorizations) == 1  # one sign-in, from the first 401
    assert query_of(sign_in.authorizations[0])["resource"] == ports.resource  # RFC 8707
    assert sign_in.storage.tokens is not None
    claims = jwt.decode(sign_in.storage.tokens.access_token, options={"verify_signature": False})
    assert (claims["aud"], claims["sub"], claims["tenant"]) == (ports.resource, "alice", "acme")


async def test_the_metadata_names_the_endpoint_and_leaves_out_what_is_empty(
        ports: Ports, provider: AuthorizationServer, gateway_on: StartOnPort) -> None:
    running_gateway = await gateway_on(oauth_gateway_config(ports, [CALC]), ports.gateway)
    async with aiohttp.ClientSession() as http:
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            async with http.get(running_gateway.base.rstrip("/") + path) as response:
                assert await response.json() == {"resource": ports.resource, "authorization_servers": [ports.issuer],
                                                 "bearer_methods_supported": ["header"]}


async def test_the_401_challenge_names_the_scope_to_ask_for(
        ports: Ports, provider: AuthorizationServer, gateway_on: StartOnPort) -> None:
    config = oauth_gateway_config(ports, [CALC], auth={"resource_metadata": {"scopes_supported": ["mcp:tools"]}})
    running_gateway = await gateway_on(config, ports.gateway)
    status, _, headers = await post(running_gateway.url)
    assert status == 401
    challenge = headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ") and 'scope="mcp:tools"' in challenge
    assert f'resource_metadata="http://127.0.0.1:{ports.gateway}/.well-known/oauth-protected-resource/mcp"' \
        in challenge


# ---------------------------------------------------------------- tokens that are not for the gateway


@pytest.mark.parametrize("which", ["another resource", "the bare origin"])
async def test_a_token_the_provider_minted_for_something_else_is_refused(
        which: str, ports: Ports, provider: AuthorizationServer, gateway_on: StartOnPort) -> None:
    running_gateway = await gateway_on(oauth_gateway_config(ports, [CALC]), ports.gateway)
    resource = {"another resource": other_resource(ports), "the bare origin": f"http://127.0.0.1:{ports.gateway}"}
    token = (await user_tokens(provider, "alice", resource[which]))["access_token"]
    status, body, headers = await post(running_gateway.url, token)
    assert status == 401
    assert 'error="invalid_token"' in headers["WWW-Authenticate"]
    assert "not issued for this resource" in headers["WWW-Authenticate"]
    assert token.encode() not in body
    good = (await user_tokens(provider, "alice", ports.resource))["access_token"]  # the same flow, for the gateway
    assert (await post(running_gateway.url, good))[0] == 200


async def test_an_id_token_is_refused_even_where_its_audience_would_pass(
        ports: Ports, provider: AuthorizationServer, gateway_on: StartOnPort) -> None:
    # an issuer whose access tokens name the client (as some do): only `typ` tells the ID token apart
    config = oauth_gateway_config(ports, [CALC], jwt={"audience": "tester"})
    running_gateway = await gateway_on(config, ports.gateway)
    id_token = (await user_tokens(provider, "alice", ports.resource))["id_token"]
    assert jwt.decode(id_token, options={"verify_signature": False})["tenant"] == "acme"  # it would name a tenant
    status, _, headers = await post(running_gateway.url, id_token)
    assert status == 401
    assert "not an access token" in headers["WWW-Authenticate"]


async def test_an_oauth_token_in_the_query_string_is_refused_unless_allowed(
        ports: Ports, provider: AuthorizationServer, gateway_on: StartOnPort) -> None:
    token = (await user_tokens(provider, "alice", ports.resource))["access_token"]
    running_gateway = await gateway_on(oauth_gateway_config(ports, [CALC]), ports.gateway)
    status, _, headers = await post(running_gateway.url, query=f"?token={token}")
    assert status == 401 and "Authorization header" in headers["WWW-Authenticate"]
    assert (await post(running_gateway.url, token))[0] == 200
    await running_gateway.server.close()
    allowed = await gateway_on(oauth_gateway_config(ports, [CALC], jwt={"query_tokens": True}), ports.gateway)
    assert (await post(allowed.url, query=f"?token={token}"))[0] == 200
    async with aiohttp.ClientSession() as http, \
            http.get(allowed.base + ".well-known/oauth-protected-resource/mcp") as response:
        assert (await response.json())["bearer_methods_supported"] == ["header", "query"]


# ---------------------------------------------------------------- step-up


@pytest.mark.parametrize("mode", ERAS)
async def test_a_call_needing_a_missing_scope_is_403_and_the_sdk_steps_up(
        mode: str, ports: Ports, provider: AuthorizationServer, gateway_on: StartOnPort) -> None:
    config = oauth_gateway_config(ports, [CALC], auth={
        "resource_metadata": {"scopes_supported": ["mcp:tools"]}, "tool_scopes": {"calc__mult*": ["mcp:secret"]}})
    running_gateway = await gateway_on(config, ports.gateway)
    sign_in = SignIn(provider.issuer, "alice")
    async with signed_in_client(running_gateway.url, sign_in, mode=mode) as client:
        assert (await client.call_tool("calc__add", {"a": 1, "b": 1})).structured_content == {"result": 2}
        assert "mcp:secret" not in sign_in.scopes[0].split()
        result = await client.call_tool("calc__multiply", {"a": 6, "b": 7})
    assert result.structured_content == {"result": 42}
    assert len(sign_in.authorizations) == 2  # the first sign-in, then the step-up
    assert {"mcp:tools", "mcp:secret"} <= set(sign_in.scopes[1].split())


async def test_the_insufficient_scope_challenge_names_what_the_call_needs(
        ports: Ports, provider: AuthorizationServer, gateway_on: StartOnPort) -> None:
    config = oauth_gateway_config(ports, [CALC], auth={
        "resource_metadata": {"scopes_supported": ["mcp:tools"]}, "tool_scopes": {"calc__mult*": ["mcp:secret"]}})
    running_gateway = await gateway_on(config, ports.gateway)
    token = (await user_tokens(provider, "alice", ports.resource))["access_token"]
    headers = dict(MCP_HEADERS, Authorization=f"Bearer {token}")
    async with aiohttp.ClientSession() as http:
        async with http.post(running_gateway.url, json=INITIALIZE, headers=headers) as response:
            headers["Mcp-Session-Id"] = response.headers["Mcp-Session-Id"]
        call = {"jsonrpc": "2.0", "id": 2, "method": spec.TOOLS_CALL,
                "params": {"name": "calc__multiply", "arguments": {"a": 1, "b": 2}}}
        async with http.post(running_gateway.url, json=call, headers=headers) as response:
            assert response.status == 403
            challenge = response.headers["WWW-Authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="mcp:secret mcp:tools"' in challenge  # what it needs, and what it holds that still counts
    assert "resource_metadata=" in challenge
