"""gateway.auth.jwks: JwksCache against a real aiohttp server serving generated keys."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import jwt
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from gateway.auth.jwks import MAX_JWKS_BYTES, JwksCache
from gateway.auth.verifier import InvalidToken, JwtVerifier
from gateway.config import JwtConfig

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


@dataclass
class Idp:
    """What the fake identity provider serves, and how often it was asked."""

    keys: list[dict[str, Any]]
    status: int = 200
    body: bytes | None = None  # served as-is instead of the key set
    chunks: int = 1  # write the body in this many parts, with a pause between them
    delay: float = 0.0
    hits: int = 0

    def document(self) -> bytes:
        return self.body if self.body is not None else json.dumps({"keys": self.keys}).encode()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Keys:
    rsa1: rsa.RSAPrivateKey = field(default_factory=lambda: rsa.generate_private_key(65537, 2048))
    rsa2: rsa.RSAPrivateKey = field(default_factory=lambda: rsa.generate_private_key(65537, 2048))
    ec1: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))


IDP = web.AppKey("idp", Idp)


def jwk(private: PrivateKey, kid: str | None) -> dict[str, Any]:
    if isinstance(private, rsa.RSAPrivateKey):
        data = RSAAlgorithm.to_jwk(private.public_key(), as_dict=True) | {"alg": "RS256"}
    else:
        data = ECAlgorithm.to_jwk(private.public_key(), as_dict=True) | {"alg": "ES256"}
    return data | {"use": "sig"} | ({"kid": kid} if kid else {})


def pem(private: PrivateKey) -> bytes:
    return private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())


async def serve_jwks(request: web.Request) -> web.StreamResponse:
    idp = request.app[IDP]
    idp.hits += 1
    if idp.delay:
        await asyncio.sleep(idp.delay)
    if idp.status != 200:
        return web.Response(status=idp.status, text="boom")
    body = idp.document()
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    size = -(-len(body) // idp.chunks)
    for start in range(0, len(body), size):
        await response.write(body[start : start + size])
        if idp.chunks > 1:
            await asyncio.sleep(0.05)
    await response.write_eof()
    return response


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys()


@pytest.fixture
async def idp(aiohttp_server: Any, keys: Keys) -> tuple[Idp, str]:
    state = Idp(keys=[jwk(keys.rsa1, "k1"), jwk(keys.ec1, "e1")])
    app = web.Application()
    app[IDP] = state
    app.router.add_get("/jwks.json", serve_jwks)
    server: TestServer = await aiohttp_server(app)
    return state, str(server.make_url("/jwks.json"))


@pytest.fixture
def clock() -> Clock:
    return Clock()


MakeCache = Callable[..., JwksCache]


@pytest.fixture
async def make_cache(idp: tuple[Idp, str], clock: Clock) -> AsyncIterator[MakeCache]:
    caches: list[JwksCache] = []

    def make(**options: Any) -> JwksCache:
        cache = JwksCache(idp[1], clock=clock, **({"min_refetch_seconds": 30.0} | options))
        caches.append(cache)
        return cache

    yield make
    for cache in caches:
        await cache.close()


def kid_of(key: jwt.PyJWK | None) -> str | None:
    return None if key is None else key.key_id


# ---------------------------------------------------------------- fetch and cache


async def test_the_first_lookup_fetches_the_key_set(idp: tuple[Idp, str], make_cache: MakeCache) -> None:
    key = await make_cache().get("k1")
    assert key is not None
    assert (key.key_id, key.algorithm_name, key.key_type, idp[0].hits) == ("k1", "RS256", "RSA", 1)


async def test_known_kids_are_served_from_the_cache(idp: tuple[Idp, str], make_cache: MakeCache) -> None:
    cache = make_cache()
    found = [kid_of(await cache.get(kid)) for kid in ("k1", "e1", "k1", "e1", "k1")]
    assert (found, idp[0].hits) == (["k1", "e1", "k1", "e1", "k1"], 1)


async def test_lookups_made_during_the_first_fetch_wait_for_it(idp: tuple[Idp, str], make_cache: MakeCache) -> None:
    cache = make_cache()
    idp[0].delay = 0.05
    found = await asyncio.gather(*(cache.get("k1") for _ in range(10)))
    assert ([kid_of(k) for k in found], idp[0].hits) == (["k1"] * 10, 1)


async def test_concurrent_first_lookups_fetch_once(idp: tuple[Idp, str], make_cache: MakeCache) -> None:
    cache = make_cache()
    idp[0].delay = 0.05
    await asyncio.gather(*(cache.get("k1") for _ in range(10)))
    assert idp[0].hits == 1


async def test_a_key_set_without_kids_gets_positional_ids(
        idp: tuple[Idp, str], make_cache: MakeCache, keys: Keys) -> None:
    idp[0].keys = [jwk(keys.rsa1, None)]
    key = await make_cache().get(None)
    assert key is not None
    assert key.key_id is None
    assert key.algorithm_name == "RS256"


async def test_no_kid_finds_the_only_key(idp: tuple[Idp, str], make_cache: MakeCache, keys: Keys) -> None:
    idp[0].keys = [jwk(keys.rsa1, "only")]
    assert kid_of(await make_cache().get(None)) == "only"


async def test_no_kid_finds_nothing_among_several_keys(idp: tuple[Idp, str], make_cache: MakeCache) -> None:
    cache = make_cache()
    assert (await cache.get(None), kid_of(await cache.get("k1")), idp[0].hits) == (None, "k1", 1)


# ---------------------------------------------------------------- refetch on unknown kid


async def test_an_unknown_kid_refetches_only_after_min_refetch_seconds(
        idp: tuple[Idp, str], make_cache: MakeCache, clock: Clock, keys: Keys) -> None:
    cache = make_cache()
    await cache.get("k1")
    idp[0].keys.append(jwk(keys.rsa2, "k2"))
    clock.now += 10
    assert (await cache.get("k2"), idp[0].hits) == (None, 1)
    clock.now += 19.9
    assert (await cache.get("k2"), idp[0].hits) == (None, 1)
    clock.now += 0.1
    assert (kid_of(await cache.get("k2")), idp[0].hits) == ("k2", 2)


async def test_forged_kids_cannot_flood_the_idp(idp: tuple[Idp, str], make_cache: MakeCache, clock: Clock) -> None:
    cache = make_cache()
    start = clock.now
    for i in range(60):
        assert await cache.get(f"forged-{i}") is None
        clock.now += 0.49
    assert idp[0].hits == 1
    clock.now = start + 30
    assert await cache.get("forged-x") is None
    assert idp[0].hits == 2


async def test_the_refetch_interval_is_configurable(
        idp: tuple[Idp, str], make_cache: MakeCache, clock: Clock) -> None:
    cache = make_cache(min_refetch_seconds=1.0)
    await cache.get("nope")
    clock.now += 1.0
    await cache.get("nope")
    assert idp[0].hits == 2


async def test_a_refetch_drops_keys_the_idp_no_longer_serves(
        idp: tuple[Idp, str], make_cache: MakeCache, clock: Clock, keys: Keys) -> None:
    cache = make_cache()
    assert kid_of(await cache.get("k1")) == "k1"
    idp[0].keys = [jwk(keys.rsa2, "k2")]
    clock.now += 30
    assert kid_of(await cache.get("k2")) == "k2"
    assert (await cache.get("k1"), idp[0].hits) == (None, 2)


# ---------------------------------------------------------------- an IdP in trouble


async def test_a_500_keeps_the_cached_keys(idp: tuple[Idp, str], make_cache: MakeCache, clock: Clock) -> None:
    cache = make_cache()
    await cache.get("k1")
    idp[0].status = 500
    clock.now += 60
    assert (await cache.get("k2"), idp[0].hits) == (None, 2)
    assert (kid_of(await cache.get("k1")), kid_of(await cache.get("e1"))) == ("k1", "e1")


async def test_a_failed_first_fetch_is_retried_after_the_interval(
        idp: tuple[Idp, str], make_cache: MakeCache, clock: Clock) -> None:
    cache = make_cache()
    idp[0].status = 503
    assert (await cache.get("k1"), idp[0].hits) == (None, 1)
    idp[0].status = 200
    clock.now += 5
    assert (await cache.get("k1"), idp[0].hits) == (None, 1)
    clock.now += 25
    assert (kid_of(await cache.get("k1")), idp[0].hits) == ("k1", 2)


@pytest.mark.parametrize("body", [
    b"not json", b"", b"\xff\xfe", b'{"keys": []}', b'{"keys": "abc"}', b'{"keys": [{"kty": "nope"}]}', b"{}",
    b'{"keys": [' + b" " * MAX_JWKS_BYTES + b"]}",
], ids=["text", "empty", "binary", "no-keys", "keys-string", "unusable-key", "empty-object", "too-large"])
async def test_a_bad_document_keeps_the_cached_keys(
        idp: tuple[Idp, str], make_cache: MakeCache, clock: Clock, body: bytes) -> None:
    cache = make_cache()
    await cache.get("k1")
    idp[0].body = body
    clock.now += 30
    assert (await cache.get("k2"), idp[0].hits) == (None, 2)
    assert kid_of(await cache.get("k1")) == "k1"


@pytest.mark.parametrize("body", [b"[]", b'"keys"', b"42"])
async def test_a_json_document_that_is_not_an_object_keeps_the_cached_keys(
        idp: tuple[Idp, str], make_cache: MakeCache, clock: Clock, body: bytes) -> None:
    cache = make_cache()
    await cache.get("k1")
    idp[0].body = body
    clock.now += 30
    assert await cache.get("k2") is None
    assert kid_of(await cache.get("k1")) == "k1"


async def test_a_slow_idp_times_out_and_keeps_the_cached_keys(
        idp: tuple[Idp, str], make_cache: MakeCache, clock: Clock) -> None:
    cache = make_cache(timeout=0.2)
    await cache.get("k1")
    idp[0].delay = 2.0
    clock.now += 30
    started = time.monotonic()
    assert await cache.get("k2") is None
    assert time.monotonic() - started < 1.5
    assert kid_of(await cache.get("k1")) == "k1"


async def test_an_unreachable_idp_gives_no_key(unused_tcp_port: int, clock: Clock) -> None:
    cache = JwksCache(f"http://127.0.0.1:{unused_tcp_port}/jwks.json", clock=clock)
    try:
        assert await cache.get("k1") is None
    finally:
        await cache.close()


async def test_a_document_sent_in_several_chunks_is_read_whole(idp: tuple[Idp, str], make_cache: MakeCache) -> None:
    idp[0].chunks = 3
    assert kid_of(await make_cache().get("k1")) == "k1"


# ---------------------------------------------------------------- through the verifier


def claims() -> dict[str, Any]:
    """An RFC 9068 access token's claims (its header names `typ: at+jwt`)."""
    now = int(time.time())
    return {"sub": "alice", "tenant": "acme", "iat": now, "exp": now + 300, "iss": "https://idp.test",
            "aud": "https://gw.test/mcp", "client_id": "app", "jti": f"jti-{now}"}


def jwks_verifier(cache: JwksCache) -> JwtVerifier:
    return JwtVerifier(JwtConfig(algorithms=("RS256", "ES256"), jwks_url=cache.url), cache)


async def test_the_verifier_checks_tokens_with_the_key_named_by_kid(make_cache: MakeCache, keys: Keys) -> None:
    verifier = jwks_verifier(make_cache())
    rsa_body, ec_body = claims(), claims() | {"sub": "bob"}
    rsa_token = jwt.encode(rsa_body, pem(keys.rsa1), algorithm="RS256", headers={"kid": "k1", "typ": "at+jwt"})
    ec_token = jwt.encode(ec_body, pem(keys.ec1), algorithm="ES256", headers={"kid": "e1", "typ": "at+jwt"})
    assert (await verifier.verify(rsa_token), await verifier.verify(ec_token)) == (rsa_body, ec_body)


async def test_the_verifier_refuses_an_unknown_kid(make_cache: MakeCache, keys: Keys) -> None:
    token = jwt.encode(claims(), pem(keys.rsa2), algorithm="RS256", headers={"kid": "k9", "typ": "at+jwt"})
    with pytest.raises(InvalidToken) as info:
        await jwks_verifier(make_cache()).verify(token)
    assert info.value.reason == "unknown_kid"


async def test_the_verifier_refuses_a_token_signed_by_another_key_under_a_known_kid(
        make_cache: MakeCache, keys: Keys) -> None:
    token = jwt.encode(claims(), pem(keys.rsa2), algorithm="RS256", headers={"kid": "k1", "typ": "at+jwt"})
    with pytest.raises(InvalidToken) as info:
        await jwks_verifier(make_cache()).verify(token)
    assert info.value.reason == "signature"


async def test_the_verifier_is_enabled_by_a_jwks_cache(make_cache: MakeCache) -> None:
    assert jwks_verifier(make_cache()).enabled is True


# ---------------------------------------------------------------- expiry and `use` (issue 16 item 10)


async def test_cached_keys_expire_so_a_key_the_idp_removed_stops_working(
        idp: tuple[Idp, str], make_cache: MakeCache, clock: Clock, keys: Keys) -> None:
    """Issue 16 item 10: a removed key was accepted for ever; now only until the cache lifetime ends."""
    cache = make_cache(cache_seconds=300.0)
    assert kid_of(await cache.get("k1")) == "k1"
    idp[0].keys = [jwk(keys.rsa2, "k2")]  # the IdP rotated k1 out
    clock.now += 299
    assert (kid_of(await cache.get("k1")), idp[0].hits) == ("k1", 1)
    clock.now += 1
    assert (await cache.get("k1"), idp[0].hits) == (None, 2)


async def test_an_idp_outage_at_expiry_keeps_the_keys_and_does_not_hammer_it(
        idp: tuple[Idp, str], make_cache: MakeCache, clock: Clock) -> None:
    cache = make_cache(cache_seconds=300.0)
    await cache.get("k1")
    idp[0].status = 500
    clock.now += 300
    for _ in range(5):
        assert kid_of(await cache.get("k1")) == "k1"
    assert idp[0].hits == 2


async def test_keys_not_meant_for_signatures_are_ignored(
        idp: tuple[Idp, str], make_cache: MakeCache, keys: Keys) -> None:
    """Issue 16 item 10: an encryption key in the same set never verifies a token."""
    idp[0].keys = [jwk(keys.rsa1, "k1") | {"use": "enc"}, jwk(keys.rsa2, "k2"), jwk(keys.ec1, "e1")]
    del idp[0].keys[2]["use"]  # no `use`: usable for signatures
    cache = make_cache()
    assert await cache.get("k1") is None
    assert kid_of(await cache.get("k2")) == "k2"
    assert kid_of(await cache.get("e1")) == "e1"
