"""Authentication over real HTTP: token sources, attacks, JWKS/public keys, RFC 9728, the CLI.

Every refusal is checked for leaks: neither the body nor the headers of a 401 may contain
the token (or a piece of it), the JWT secret or an API key.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import jwt
import orjson
import pytest
from aiohttp import web
from conftest import API_KEY, JWT_SECRET, MCP_HEADERS, RawClient, StartGateway, make_config
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from gateway.config import load_config

pytestmark = pytest.mark.timeout(60)

ISSUER = "https://idp.test"
AUDIENCE = "mcp-gateway-test"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "t", "version": "1"}}}


# ---------------------------------------------------------------- keys and tokens


@dataclass(frozen=True)
class Keys:
    rsa: rsa.RSAPrivateKey
    other_rsa: rsa.RSAPrivateKey
    ec: ec.EllipticCurvePrivateKey
    ed: ed25519.Ed25519PrivateKey
    other_ed: ed25519.Ed25519PrivateKey


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys(rsa.generate_private_key(65537, 2048), rsa.generate_private_key(65537, 2048),
                ec.generate_private_key(ec.SECP256R1()), ed25519.Ed25519PrivateKey.generate(),
                ed25519.Ed25519PrivateKey.generate())


def public_pem(private: Any) -> bytes:
    return private.public_key().public_bytes(serialization.Encoding.PEM,
                                             serialization.PublicFormat.SubjectPublicKeyInfo)


def claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"tenant": "acme", "sub": "tester", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 300,
            **overrides}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge(header: dict[str, Any], payload: dict[str, Any], sign: Callable[[bytes], bytes] = lambda _: b"") -> str:
    """A JWT assembled by hand, so pyjwt's own safety checks cannot stop the attack."""
    signing_input = f"{b64(orjson.dumps(header))}.{b64(orjson.dumps(payload))}"
    return f"{signing_input}.{b64(sign(signing_input.encode()))}"


def tampered(token: str, **changes: Any) -> str:
    head, payload, signature = token.split(".")
    body = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return f"{head}.{b64(orjson.dumps({**body, **changes}))}.{signature}"


def hs(payload: dict[str, Any], secret: str = JWT_SECRET) -> str:
    return jwt.encode(payload, secret, algorithm="HS256")


# ---------------------------------------------------------------- helpers


def leaks(token: str, body: bytes, headers: Any) -> list[str]:
    """Secrets (the token, its parts, the JWT secret, the API key) found in a reply."""
    text = body.decode("utf-8", "replace") + "\n" + "\n".join(f"{k}: {v}" for k, v in headers.items())
    pieces = [token, *(part for part in token.split(".") if len(part) >= 8), JWT_SECRET, API_KEY]
    return [piece for piece in pieces if piece and piece in text]


async def post_initialize(session: aiohttp.ClientSession, url: str, headers: dict[str, str] | None = None,
                          params_token: str | None = None) -> tuple[int, bytes, Any]:
    message = orjson.loads(orjson.dumps(INITIALIZE))
    if params_token is not None:
        message["params"]["token"] = params_token
    async with session.post(url, data=orjson.dumps(message), headers={**MCP_HEADERS, **(headers or {})}) as resp:
        return resp.status, await resp.read(), resp.headers


async def bearer(url: str, token: str) -> tuple[int, bytes, Any]:
    async with aiohttp.ClientSession() as session:
        return await post_initialize(session, url, {"Authorization": f"Bearer {token}"})


async def assert_refused(url: str, token: str, *, header: str | None = None) -> None:
    """401 invalid_token with a resource_metadata challenge, and no secret in the reply."""
    async with aiohttp.ClientSession() as session:
        status, body, headers = await post_initialize(session, url, {"Authorization": header or f"Bearer {token}"})
    assert status == 401, body
    challenge = headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
    assert 'resource_metadata="http://127.0.0.1:' in challenge
    assert orjson.loads(body)["error"]["message"] == "Unauthorized: invalid token"
    assert leaks(token, body, headers) == []


def hs_config(**auth: Any) -> Any:
    jwt_section = {"secret": JWT_SECRET, "issuer": ISSUER, "audience": AUDIENCE}
    return make_config([], tenants={"acme": {}}, auth={"jwt": jwt_section, **auth})


# ---------------------------------------------------------------- token sources


SOURCES = ["header", "query", "params"]


async def _initialize_via(url: str, source: str, token: str) -> tuple[int, bytes, Any]:
    async with aiohttp.ClientSession() as session:
        if source == "header":
            return await post_initialize(session, url, {"Authorization": f"Bearer {token}"})
        if source == "query":
            return await post_initialize(session, f"{url}?token={token}")
        return await post_initialize(session, url, params_token=token)


@pytest.mark.parametrize("enabled", SOURCES)
@pytest.mark.parametrize("used", SOURCES)
async def test_a_token_is_accepted_only_from_an_enabled_source(gateway: StartGateway, enabled: str,
                                                               used: str) -> None:
    running = await gateway(hs_config(token_sources=[enabled]))
    token = hs(claims())
    status, body, headers = await _initialize_via(running.url, used, token)
    if used == enabled:
        assert status == 200, body
        assert orjson.loads(body)["result"]["serverInfo"]["name"] == "mcp-gateway"
    else:
        assert status == 401
        assert "error=" not in headers["WWW-Authenticate"]  # as if no token was sent at all
        assert leaks(token, body, headers) == []


@pytest.mark.parametrize("source", SOURCES)
async def test_every_source_works_when_all_are_enabled(gateway: StartGateway, source: str) -> None:
    running = await gateway(hs_config())
    status, body, _ = await _initialize_via(running.url, source, hs(claims()))
    assert status == 200, body


async def test_the_query_parameter_name_is_configurable(gateway: StartGateway) -> None:
    running = await gateway(hs_config(token_sources=["query"], query_param="access_token"))
    token = hs(claims())
    async with aiohttp.ClientSession() as session:
        assert (await post_initialize(session, f"{running.url}?access_token={token}"))[0] == 200
        assert (await post_initialize(session, f"{running.url}?token={token}"))[0] == 401


async def test_the_header_wins_over_a_bad_query_token(gateway: StartGateway) -> None:
    running = await gateway(hs_config())
    async with aiohttp.ClientSession() as session:
        status, _, _ = await post_initialize(session, f"{running.url}?token=garbage",
                                             {"Authorization": f"Bearer {hs(claims())}"})
    assert status == 200


async def test_an_api_key_is_a_bearer_token(gateway: StartGateway) -> None:
    running = await gateway(hs_config())
    status, body, _ = await bearer(running.url, API_KEY)
    assert status == 200, body


async def test_no_token_is_401_without_an_error_code(gateway: StartGateway) -> None:
    running = await gateway(hs_config())
    async with aiohttp.ClientSession() as session:
        status, _, headers = await post_initialize(session, running.url)
    assert status == 401
    assert headers["WWW-Authenticate"] == (
        f'Bearer resource_metadata="{running.base}.well-known/oauth-protected-resource/mcp"')


# ---------------------------------------------------------------- attacks on an HS256 gateway


HS_ATTACKS: dict[str, Callable[[], str]] = {
    "alg none": lambda: forge({"alg": "none", "typ": "JWT"}, claims()),
    "alg none, no signature part": lambda: forge({"alg": "none"}, claims())[:-1].rstrip("."),
    "expired": lambda: hs(claims(exp=int(time.time()) - 3600)),
    "not yet valid": lambda: hs(claims(nbf=int(time.time()) + 3600)),
    "wrong issuer": lambda: hs(claims(iss="https://evil.test")),
    "no issuer": lambda: hs({k: v for k, v in claims().items() if k != "iss"}),
    "wrong audience": lambda: hs(claims(aud="someone-else")),
    "no expiry": lambda: hs({k: v for k, v in claims().items() if k != "exp"}),
    "tampered payload": lambda: tampered(hs(claims()), tenant="beta", scope="mcpgw:admin"),
    "tampered header": lambda: f"{b64(orjson.dumps({'alg': 'HS512', 'typ': 'JWT'}))}.{hs(claims()).split('.', 1)[1]}",
    "wrong secret": lambda: hs(claims(), secret="another-secret-that-is-long-enough-0123456789"),
    "garbage": lambda: "garbage-not-a-token",
    "three garbage parts": lambda: "aaaaaaaaaa.bbbbbbbbbb.cccccccccc",
    "revoked api key": lambda: "test-api-key-revoked-or-never-issued",
    "api key with a suffix": lambda: API_KEY + "x",
}


@pytest.mark.parametrize("attack", list(HS_ATTACKS))
async def test_an_attack_on_an_hs256_gateway_is_refused_without_leaking(gateway: StartGateway, attack: str) -> None:
    running = await gateway(hs_config())
    await assert_refused(running.url, HS_ATTACKS[attack]())


@pytest.mark.parametrize("header", ["Bearer ", "Bearer", "Basic dXNlcjpwYXNz", "bearer  "])
async def test_an_empty_or_non_bearer_credential_is_invalid(gateway: StartGateway, header: str) -> None:
    running = await gateway(hs_config())
    await assert_refused(running.url, "", header=header)


async def test_a_good_hs256_token_is_accepted_so_the_attacks_above_are_meaningful(gateway: StartGateway) -> None:
    running = await gateway(hs_config())
    status, body, _ = await bearer(running.url, hs(claims()))
    assert status == 200, body


async def test_an_api_key_removed_from_the_config_stops_working(gateway: StartGateway) -> None:
    with_key = await gateway(hs_config())
    assert (await bearer(with_key.url, API_KEY))[0] == 200
    without_key = await gateway(hs_config(api_keys=[]))
    await assert_refused(without_key.url, API_KEY)


async def test_a_valid_token_for_an_unknown_tenant_is_403_not_401(gateway: StartGateway) -> None:
    running = await gateway(hs_config())
    status, _, _ = await bearer(running.url, hs(claims(tenant="no-such-tenant")))
    assert status == 403


# ---------------------------------------------------------------- RS256 with a public key file


@pytest.fixture
async def rs_gateway(gateway: StartGateway, keys: Keys, tmp_path: Path) -> str:
    key_file = tmp_path / "rsa.pem"
    key_file.write_bytes(public_pem(keys.rsa))
    jwt_section = {"algorithms": ["RS256"], "public_key_file": str(key_file), "issuer": ISSUER, "audience": AUDIENCE,
                   "require_typ": None}  # key handling here; tests/oauth checks RFC 9068 access tokens
    running = await gateway(make_config([], tenants={"acme": {}}, auth={"jwt": jwt_section}))
    return running.url


async def test_rs256_with_the_configured_public_key_is_accepted(rs_gateway: str, keys: Keys) -> None:
    status, body, _ = await bearer(rs_gateway, jwt.encode(claims(), keys.rsa, algorithm="RS256"))
    assert status == 200, body


async def test_rs256_resigned_as_hs256_with_the_public_key_as_secret_is_refused(rs_gateway: str, keys: Keys) -> None:
    pem = public_pem(keys.rsa)
    for secret in (pem, pem.strip()):
        token = forge({"alg": "HS256", "typ": "JWT"}, claims(),
                      lambda data, s=secret: hmac.new(s, data, hashlib.sha256).digest())
        await assert_refused(rs_gateway, token)


@pytest.mark.parametrize("attack", ["other key", "alg none", "tampered", "expired"])
async def test_attacks_on_an_rs256_gateway_are_refused(rs_gateway: str, keys: Keys, attack: str) -> None:
    good = jwt.encode(claims(), keys.rsa, algorithm="RS256")
    token = {
        "other key": lambda: jwt.encode(claims(), keys.other_rsa, algorithm="RS256"),
        "alg none": lambda: forge({"alg": "none"}, claims()),
        "tampered": lambda: tampered(good, sub="admin"),
        "expired": lambda: jwt.encode(claims(exp=int(time.time()) - 3600), keys.rsa, algorithm="RS256"),
    }[attack]()
    await assert_refused(rs_gateway, token)


# ---------------------------------------------------------------- EdDSA with a public key file


async def test_eddsa_with_a_public_key_file(gateway: StartGateway, keys: Keys, tmp_path: Path) -> None:
    key_file = tmp_path / "ed25519.pem"
    key_file.write_bytes(public_pem(keys.ed))
    jwt_section = {"algorithms": ["EdDSA"], "public_key_file": str(key_file), "audience": AUDIENCE, "require_typ": None}
    running = await gateway(make_config([], tenants={"acme": {}}, auth={"jwt": jwt_section}))
    status, body, _ = await bearer(running.url, jwt.encode(claims(), keys.ed, algorithm="EdDSA"))
    assert status == 200, body
    await assert_refused(running.url, jwt.encode(claims(), keys.other_ed, algorithm="EdDSA"))


# ---------------------------------------------------------------- JWKS


@dataclass
class Jwks:
    url: str
    fetches: list[float]


@pytest.fixture
async def jwks(aiohttp_server: Any, keys: Keys) -> Jwks:
    """A real JWKS endpoint on 127.0.0.1 with one RSA and one EC key."""
    rsa_jwk = {**RSAAlgorithm.to_jwk(keys.rsa.public_key(), as_dict=True), "kid": "rsa-1", "use": "sig"}
    ec_jwk = {**ECAlgorithm.to_jwk(keys.ec.public_key(), as_dict=True), "kid": "ec-1", "use": "sig"}
    fetches: list[float] = []

    async def serve(request: web.Request) -> web.Response:
        fetches.append(time.monotonic())
        return web.json_response({"keys": [rsa_jwk, ec_jwk]})

    app = web.Application()
    app.router.add_get("/jwks.json", serve)
    server = await aiohttp_server(app)
    return Jwks(str(server.make_url("/jwks.json")), fetches)


@pytest.fixture
async def jwks_gateway(gateway: StartGateway, jwks: Jwks) -> str:
    jwt_section = {"algorithms": ["RS256", "ES256"], "jwks_url": jwks.url, "issuer": ISSUER, "audience": AUDIENCE,
                   "require_typ": None}
    running = await gateway(make_config([], tenants={"acme": {}}, auth={"jwt": jwt_section}))
    return running.url


async def test_rs256_and_es256_via_jwks_are_accepted(jwks_gateway: str, keys: Keys, jwks: Jwks) -> None:
    rs = jwt.encode(claims(), keys.rsa, algorithm="RS256", headers={"kid": "rsa-1"})
    es = jwt.encode(claims(sub="ec-user"), keys.ec, algorithm="ES256", headers={"kid": "ec-1"})
    for token in (rs, es):
        status, body, _ = await bearer(jwks_gateway, token)
        assert status == 200, body
    assert len(jwks.fetches) == 1  # fetched once, then cached


async def test_an_unknown_kid_is_refused_and_cannot_flood_the_jwks_endpoint(jwks_gateway: str, keys: Keys,
                                                                            jwks: Jwks) -> None:
    known = jwt.encode(claims(), keys.rsa, algorithm="RS256", headers={"kid": "rsa-1"})
    assert (await bearer(jwks_gateway, known))[0] == 200
    for i in range(5):
        forged = jwt.encode(claims(), keys.other_rsa, algorithm="RS256", headers={"kid": f"forged-{i}"})
        await assert_refused(jwks_gateway, forged)
    assert len(jwks.fetches) == 1  # unknown kids refetch at most once per MIN_REFETCH_SECONDS


@pytest.mark.parametrize("attack", ["kid of the other key", "no kid", "alg none", "hs256 with the jwk",
                                    "right kid, wrong key", "wrong audience"])
async def test_attacks_on_a_jwks_gateway_are_refused(jwks_gateway: str, keys: Keys, attack: str) -> None:
    pem = public_pem(keys.rsa)
    token = {
        "kid of the other key": lambda: jwt.encode(claims(), keys.rsa, algorithm="RS256", headers={"kid": "ec-1"}),
        "no kid": lambda: jwt.encode(claims(), keys.rsa, algorithm="RS256"),  # two keys: no guessing
        "alg none": lambda: forge({"alg": "none", "kid": "rsa-1"}, claims()),
        "hs256 with the jwk": lambda: forge({"alg": "HS256", "kid": "rsa-1"}, claims(),
                                            lambda data: hmac.new(pem, data, hashlib.sha256).digest()),
        "right kid, wrong key": lambda: jwt.encode(claims(), keys.other_rsa, algorithm="RS256",
                                                   headers={"kid": "rsa-1"}),
        "wrong audience": lambda: jwt.encode(claims(aud="other"), keys.rsa, algorithm="RS256",
                                             headers={"kid": "rsa-1"}),
    }[attack]()
    await assert_refused(jwks_gateway, token)


# ---------------------------------------------------------------- RFC 9728


async def test_protected_resource_metadata_at_both_well_known_urls(gateway: StartGateway) -> None:
    metadata = {"authorization_servers": ["https://idp.test"], "scopes_supported": ["mcpgw:admin", "tools"]}
    running = await gateway(hs_config(resource_metadata=metadata))
    origin = running.base.rstrip("/")
    async with aiohttp.ClientSession() as session:
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            async with session.get(origin + path) as resp:
                assert resp.status == 200
                body = await resp.json()
            # both name the MCP endpoint: a client discovering from the root asks for a token the gateway takes
            assert body["resource"] == running.url
            assert body["authorization_servers"] == ["https://idp.test"]
            assert body["scopes_supported"] == ["mcpgw:admin", "tools"]
            assert "header" in body["bearer_methods_supported"]


async def test_the_challenge_points_at_metadata_naming_this_endpoint(gateway: StartGateway) -> None:
    running = await gateway(hs_config())
    status, _, headers = await bearer(running.url, "garbage")
    assert status == 401
    url = headers["WWW-Authenticate"].split('resource_metadata="', 1)[1].split('"', 1)[0]
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        assert (await resp.json())["resource"] == running.url


async def test_public_url_names_the_resource_and_the_metadata(gateway: StartGateway) -> None:
    config = make_config([], tenants={"acme": {}}, server={"public_url": "https://gw.example.com/"})
    running = await gateway(config)
    status, _, headers = await bearer(running.url, "garbage")
    assert status == 401
    assert ('resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp"'
            in headers["WWW-Authenticate"])
    async with aiohttp.ClientSession() as session:
        async with session.get(running.base + ".well-known/oauth-protected-resource/mcp") as resp:
            assert (await resp.json())["resource"] == "https://gw.example.com/mcp"
        async with session.get(running.base + ".well-known/oauth-protected-resource") as resp:
            assert (await resp.json())["resource"] == "https://gw.example.com/mcp"


async def test_bearer_methods_follow_the_enabled_token_sources(gateway: StartGateway) -> None:
    running = await gateway(hs_config(token_sources=["header", "query"]))
    async with aiohttp.ClientSession() as session, \
            session.get(running.base + ".well-known/oauth-protected-resource/mcp") as resp:
        assert (await resp.json())["bearer_methods_supported"] == ["header", "query"]


# ---------------------------------------------------------------- the token CLI


async def test_a_token_minted_by_the_cli_is_accepted(gateway: StartGateway, raw_client: Any, tmp_path: Path) -> None:
    config_file = tmp_path / "gateway.yaml"
    config_file.write_text(
        f"auth:\n  jwt: {{secret: {JWT_SECRET}, issuer: {ISSUER}, audience: {AUDIENCE}}}\n"
        "tenants:\n  acme: {backends: [\"*\"]}\n")
    cli = Path(sys.executable).with_name("mcp-gateway")
    process = await asyncio.create_subprocess_exec(
        str(cli), "token", "--tenant", "acme", "--sub", "cli-user", "--scope", "mcpgw:admin tools:read",
        "--ttl", "120", "--config", str(config_file),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, stderr
    token = stdout.decode().strip()
    minted = jwt.decode(token, options={"verify_signature": False})
    assert (minted["tenant"], minted["sub"], minted["exp"] - minted["iat"]) == ("acme", "cli-user", 120)

    running = await gateway(load_config(config_file, {}))
    client: RawClient = raw_client(running.url, token)
    await client.initialize()
    assert "result" in await client.call("ping")
    async with aiohttp.ClientSession() as session, session.get(
            running.base + "admin/backends", headers={"Authorization": f"Bearer {token}"}) as resp:
        assert resp.status == 200  # the space-separated scope carried mcpgw:admin
