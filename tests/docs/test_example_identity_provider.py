"""examples/identity-provider.yaml does what its header says: tokens an identity provider signed
(RS256, its key published as a JWKS) sign callers in, the tenant comes from a nested claim, and
the RFC 9728 metadata points clients at the provider.

The provider is a JWKS document served on 127.0.0.1 (its URL and the backend's are the only
overrides, through MCPGW_ variables, as an operator would set them).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import jwt
import pytest
from aiohttp import web
from backend_fixtures import StartBackend
from conftest import StartGateway
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.config import load_config

pytestmark = pytest.mark.timeout(60)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "identity-provider.yaml"
ISSUER = "https://login.example.com/"
AUDIENCE = "https://mcp.example.com/mcp"


def signed(key: rsa.RSAPrivateKey, typ: str = "at+jwt", **claims: Any) -> str:
    """An access token as RFC 9068 profiles it (an ID token: `typ` JWT)."""
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 300, "client_id": "app",
            "jti": f"t-{time.monotonic_ns()}", **claims}
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": "key-1", "typ": typ})


async def test_the_providers_tokens_sign_callers_in_to_their_tenant(gateway: StartGateway, http_backend: StartBackend,
                                                                     aiohttp_server: Any, raw_client: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())), "kid": "key-1", "use": "sig"}
    provider = web.Application()
    provider.router.add_get("/.well-known/jwks.json", lambda _: web.json_response({"keys": [jwk]}))
    jwks = await aiohttp_server(provider)
    docs = await http_backend("calc")
    monkeypatch.setenv("MCPGW_AUTH__JWT__JWKS_URL", str(jwks.make_url("/.well-known/jwks.json")))
    monkeypatch.setenv("MCPGW_BACKENDS__docs__URL", docs.url)
    running = await gateway(load_config(EXAMPLE))

    acme = raw_client(running.url, signed(key, org={"id": "acme"}))
    await acme.initialize()
    assert "docs__add" in {tool["name"] for tool in (await acme.call("tools/list"))["result"]["tools"]}
    globex = raw_client(running.url, signed(key, org={"id": "globex"}))
    await globex.initialize()
    assert (await globex.call("tools/list"))["result"]["tools"] == []  # its policy allows docs__search* only

    for refused in (signed(key, org={"id": "acme"}, aud="https://another-app.example.com"),
                    signed(key, "JWT", org={"id": "acme"}),  # an ID token, not an access token
                    signed(rsa.generate_private_key(public_exponent=65537, key_size=2048), org={"id": "acme"})):
        status, _, _ = await raw_client(running.url, refused).post({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert status == 401

    async with aiohttp.ClientSession() as session, \
            session.get(running.base + ".well-known/oauth-protected-resource/mcp") as reply:
        metadata = await reply.json()
    assert metadata["authorization_servers"] == [ISSUER]
    assert metadata["resource"] == "https://mcp.example.com/mcp"
