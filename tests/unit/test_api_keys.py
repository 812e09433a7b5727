"""gateway.auth.api_keys: keys are matched by sha256, every configured hash is compared."""

from __future__ import annotations

import hashlib

from gateway.auth.api_keys import ApiKeyIndex
from gateway.config import ApiKeyConfig
from gateway.tenancy import Principal


def key(secret: str, tenant: str, subject: str, *scopes: str) -> ApiKeyConfig:
    return ApiKeyConfig(hashlib.sha256(secret.encode()).hexdigest(), tenant, subject, scopes)


INDEX = ApiKeyIndex([key("acme-key", "acme", "ci-bot", "mcpgw:admin", "read"), key("globex-key", "globex", "demo")])


def test_a_known_key_gives_its_principal() -> None:
    assert INDEX.lookup("acme-key") == Principal("acme", "ci-bot", frozenset({"mcpgw:admin", "read"}))


def test_each_key_maps_to_its_own_tenant() -> None:
    assert INDEX.lookup("globex-key") == Principal("globex", "demo", frozenset())


def test_an_unknown_key_gives_none() -> None:
    assert INDEX.lookup("acme-key ") is None
    assert INDEX.lookup("") is None


def test_the_configured_hash_is_not_itself_a_key() -> None:
    assert INDEX.lookup(hashlib.sha256(b"acme-key").hexdigest()) is None


def test_an_empty_index_knows_no_key() -> None:
    assert ApiKeyIndex([]).lookup("acme-key") is None


def test_upper_case_hex_in_the_config_still_matches() -> None:
    upper = ApiKeyConfig(hashlib.sha256(b"k").hexdigest().upper(), "acme", "bot")
    assert ApiKeyIndex([upper]).lookup("k") == Principal("acme", "bot")


def test_a_non_ascii_key_is_hashed_as_utf8() -> None:
    assert ApiKeyIndex([key("clé-ü", "acme", "bot")]).lookup("clé-ü") == Principal("acme", "bot")


def test_a_key_with_a_lone_surrogate_does_not_raise() -> None:
    assert INDEX.lookup("\ud800") is None


def test_the_principal_of_an_api_key_has_no_expiry() -> None:
    principal = INDEX.lookup("acme-key")
    assert principal is not None
    assert principal.expires_at is None
