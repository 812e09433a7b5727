"""gateway.auth.verifier: JwtVerifier with HS256 secrets and RS256/ES256 key files, and the usual attacks."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from gateway.auth.verifier import InvalidToken, JwtVerifier, claim, scopes_of
from gateway.config import JwtConfig

SECRET = "unit-test-secret-0123456789abcdef0123"
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


def now() -> int:
    return int(time.time())


def claims(**extra: Any) -> dict[str, Any]:
    return {"sub": "alice", "tenant": "acme", "iat": now(), "exp": now() + 300, **extra}


def pem(private: PrivateKey) -> bytes:
    return private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())


def public_pem(private: PrivateKey) -> bytes:
    return private.public_key().public_bytes(serialization.Encoding.PEM,
                                             serialization.PublicFormat.SubjectPublicKeyInfo)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def hand_signed_hs256(payload: dict[str, Any], secret: bytes, **header: Any) -> str:
    """An HS256 token signed by hand (pyjwt refuses to use a PEM key as an HMAC secret)."""
    signing_input = f"{b64(json.dumps({'alg': 'HS256', 'typ': 'JWT', **header}).encode())}." \
                    f"{b64(json.dumps(payload).encode())}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(signature)}"


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture
def rsa_verifier(rsa_key: rsa.RSAPrivateKey, tmp_path: Path) -> JwtVerifier:
    file = tmp_path / "rsa.pem"
    file.write_bytes(public_pem(rsa_key))
    return JwtVerifier(JwtConfig(algorithms=("RS256",), public_key_file=str(file), require_typ=None))


@pytest.fixture
def ec_verifier(ec_key: ec.EllipticCurvePrivateKey, tmp_path: Path) -> JwtVerifier:
    file = tmp_path / "ec.pem"
    file.write_bytes(public_pem(ec_key))
    return JwtVerifier(JwtConfig(algorithms=("ES256",), public_key_file=str(file), require_typ=None))


def hs_verifier(**config: Any) -> JwtVerifier:
    return JwtVerifier(JwtConfig(secret=SECRET, **config))


async def reason(verifier: JwtVerifier, token: str) -> str:
    with pytest.raises(InvalidToken) as info:
        await verifier.verify(token)
    assert str(info.value) == info.value.reason
    return info.value.reason


# ---------------------------------------------------------------- good tokens


async def test_a_valid_hs256_token_gives_its_claims() -> None:
    body = claims(scope="read write")
    assert await hs_verifier().verify(jwt.encode(body, SECRET, algorithm="HS256")) == body


async def test_a_valid_rs256_token_verifies_with_the_public_key_file(
        rsa_verifier: JwtVerifier, rsa_key: rsa.RSAPrivateKey) -> None:
    body = claims()
    assert await rsa_verifier.verify(jwt.encode(body, pem(rsa_key), algorithm="RS256")) == body


async def test_a_valid_es256_token_verifies_with_the_public_key_file(
        ec_verifier: JwtVerifier, ec_key: ec.EllipticCurvePrivateKey) -> None:
    body = claims()
    assert await ec_verifier.verify(jwt.encode(body, pem(ec_key), algorithm="ES256")) == body


async def test_matching_issuer_and_audience_are_accepted() -> None:
    verifier = hs_verifier(issuer="https://idp", audience="mcp-gateway")
    body = claims(iss="https://idp", aud=["other", "mcp-gateway"])
    assert await verifier.verify(jwt.encode(body, SECRET, algorithm="HS256")) == body


async def test_an_audience_is_not_checked_when_none_is_configured() -> None:
    body = claims(aud="someone-else")
    assert await hs_verifier().verify(jwt.encode(body, SECRET, algorithm="HS256")) == body


async def test_a_token_expired_within_the_leeway_is_accepted() -> None:
    body = claims(exp=now() - 10)
    assert await hs_verifier(leeway_seconds=30).verify(jwt.encode(body, SECRET, algorithm="HS256")) == body


# ---------------------------------------------------------------- attacks and failures


async def test_an_unsigned_alg_none_token_is_refused() -> None:
    token = jwt.encode(claims(), None, algorithm="none")
    assert await reason(hs_verifier(), token) == "algorithm"


async def test_an_alg_none_token_is_refused_even_with_a_signature_part() -> None:
    header = b64(json.dumps({"alg": "none"}).encode())
    token = f"{header}.{b64(json.dumps(claims()).encode())}.{b64(b'sig')}"
    assert await reason(hs_verifier(), token) == "algorithm"


async def test_an_rs256_token_re_signed_hs256_with_the_public_key_is_refused(
        rsa_verifier: JwtVerifier, rsa_key: rsa.RSAPrivateKey) -> None:
    forged = hand_signed_hs256(claims(), public_pem(rsa_key))
    assert await reason(rsa_verifier, forged) == "algorithm"


async def test_key_confusion_is_refused_even_if_both_families_are_allowed(
        rsa_key: rsa.RSAPrivateKey, tmp_path: Path) -> None:
    file = tmp_path / "rsa.pem"
    file.write_bytes(public_pem(rsa_key))
    verifier = JwtVerifier(JwtConfig(algorithms=("RS256", "HS256"), public_key_file=str(file)))
    assert await reason(verifier, hand_signed_hs256(claims(), public_pem(rsa_key))) == "algorithm"


async def test_an_algorithm_outside_the_configured_list_is_refused(rsa_key: rsa.RSAPrivateKey) -> None:
    token = jwt.encode(claims(), SECRET + "x" * 32, algorithm="HS512")
    assert await reason(hs_verifier(), token) == "algorithm"
    assert await reason(hs_verifier(), jwt.encode(claims(), pem(rsa_key), algorithm="RS256")) == "algorithm"


async def test_an_hs256_token_without_a_configured_secret_is_refused() -> None:
    verifier = JwtVerifier(JwtConfig(algorithms=("HS256",)))
    assert await reason(verifier, jwt.encode(claims(), SECRET, algorithm="HS256")) == "algorithm"


async def test_an_expired_token_is_refused() -> None:
    assert await reason(hs_verifier(), jwt.encode(claims(exp=now() - 3600), SECRET, algorithm="HS256")) == "expired"


async def test_an_expiry_just_past_the_leeway_is_refused() -> None:
    token = jwt.encode(claims(exp=now() - 60), SECRET, algorithm="HS256")
    assert await reason(hs_verifier(leeway_seconds=30), token) == "expired"
    assert await reason(hs_verifier(leeway_seconds=0), jwt.encode(claims(exp=now() - 5), SECRET)) == "expired"


async def test_a_token_not_yet_valid_is_refused() -> None:
    token = jwt.encode(claims(nbf=now() + 3600), SECRET, algorithm="HS256")
    assert await reason(hs_verifier(), token) == "not_yet_valid"


async def test_a_token_valid_soon_within_the_leeway_is_accepted() -> None:
    body = claims(nbf=now() + 10)
    assert await hs_verifier(leeway_seconds=30).verify(jwt.encode(body, SECRET, algorithm="HS256")) == body


async def test_a_wrong_issuer_is_refused() -> None:
    token = jwt.encode(claims(iss="https://evil"), SECRET, algorithm="HS256")
    assert await reason(hs_verifier(issuer="https://idp"), token) == "claims"


async def test_a_wrong_audience_is_refused() -> None:
    token = jwt.encode(claims(aud="other-api"), SECRET, algorithm="HS256")
    assert await reason(hs_verifier(audience="mcp-gateway"), token) == "audience"


async def test_a_tampered_payload_is_refused() -> None:
    header, _, signature = jwt.encode(claims(), SECRET, algorithm="HS256").split(".")
    tampered = f"{header}.{b64(json.dumps(claims(tenant='globex')).encode())}.{signature}"
    assert await reason(hs_verifier(), tampered) == "signature"


async def test_a_token_signed_with_another_secret_is_refused() -> None:
    token = jwt.encode(claims(), "another-secret-0123456789abcdef0123456", algorithm="HS256")
    assert await reason(hs_verifier(), token) == "signature"


async def test_a_token_signed_by_another_rsa_key_is_refused(rsa_verifier: JwtVerifier) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert await reason(rsa_verifier, jwt.encode(claims(), pem(other), algorithm="RS256")) == "signature"


async def test_an_es256_signature_cannot_pass_for_another_curve_key(
        ec_verifier: JwtVerifier) -> None:
    other = ec.generate_private_key(ec.SECP256R1())
    assert await reason(ec_verifier, jwt.encode(claims(), pem(other), algorithm="ES256")) == "signature"


@pytest.mark.parametrize("token", ["", "garbage", "a.b.c", "...", "eyJhbGciOiJIUzI1NiJ9", "\u00e9.\u00e9.\u00e9"])
async def test_garbage_is_refused_as_malformed(token: str) -> None:
    assert await reason(hs_verifier(), token) == "malformed"


async def test_a_token_without_exp_is_refused() -> None:
    body = claims()
    del body["exp"]
    assert await reason(hs_verifier(), jwt.encode(body, SECRET, algorithm="HS256")) == "claims"


async def test_a_token_without_the_configured_audience_is_refused() -> None:
    token = jwt.encode(claims(), SECRET, algorithm="HS256")
    assert await reason(hs_verifier(audience="mcp-gateway"), token) == "audience"


# ---------------------------------------------------------------- enabled, claim, scopes_of


def test_the_verifier_is_enabled_only_with_a_key() -> None:
    assert (JwtVerifier(JwtConfig()).enabled, hs_verifier().enabled) == (False, True)


def test_the_verifier_is_enabled_by_a_public_key_file(rsa_verifier: JwtVerifier) -> None:
    assert rsa_verifier.enabled is True


def test_claim_follows_a_dotted_path() -> None:
    body = {"org": {"tenant": "acme", "n": 1}, "sub": "a"}
    assert (claim(body, "org.tenant"), claim(body, "sub"), claim(body, "org.missing"), claim(body, "sub.x"),
            claim(body, "org")) == ("acme", "a", None, None, {"tenant": "acme", "n": 1})


@pytest.mark.parametrize(("value", "expected"), [
    ("read  write", {"read", "write"}), ("", set()), (["a", 1, "b", None], {"a", "b"}), (None, set()),
    ({"a": 1}, set()), (5, set()),
])
def test_scopes_of_reads_a_string_or_a_list(value: Any, expected: set[str]) -> None:
    assert scopes_of(value) == frozenset(expected)
