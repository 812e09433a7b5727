"""Backends' `auth` (and tenants' `backend_auth`), and the `oauth` section: the gateway as an OAuth client."""

from __future__ import annotations

import base64
import binascii

from gateway.config.auth import scopes
from gateway.config.backend_http import check_jwks_url
from gateway.config.model import AUTH_MODES, BackendAuth, Config, ConfirmUser, HttpBackend, OAuthConfig
from gateway.config.reader import ConfigError, Section, mapping, read

CLIENT_AUTH = ("client_secret_basic", "client_secret_post")
CATALOGUE_AUTH = ("client_credentials", "headers")
KEY_BYTES = 32
URL_KEYS = ("issuer", "token_url", "authorization_url", "revocation_url")


def backend_auth(s: Section) -> BackendAuth:
    mode = s.required("mode", str)
    if mode not in AUTH_MODES:
        raise ConfigError(f"{s.where('mode')}: must be one of {', '.join(AUTH_MODES)}")
    if mode == "none":
        return BackendAuth(mode="none")
    auth = BackendAuth(
        mode=mode, **{key: _url(s, key) for key in URL_KEYS},
        client_id=s.required("client_id", str), client_secret=_secret(s),
        client_auth=_choice(s, "client_auth", CLIENT_AUTH), scopes=scopes(s, "scopes"),
        resource=s.get("resource", str), audience=s.get("audience", str),
        subject_token_type=s.get("subject_token_type", str), actor=s.get("actor", bool),
        catalogue=_choice(s, "catalogue", CATALOGUE_AUTH))
    _check_endpoints(s, auth)
    if auth.client_secret is None and (mode != "user_oauth" or auth.catalogue_auth == "client_credentials"):
        raise ConfigError(f"{s.where('client_secret')}: required for {mode} (the gateway's own client credentials)")
    return auth


def tenant_backend_auth(s: Section) -> dict[str, BackendAuth]:
    """`tenants.<t>.backend_auth`: a backend's `auth` replaced for one tenant."""
    s.seen.add("backend_auth")
    entries = mapping(s.data.get("backend_auth"), s.where("backend_auth"))
    return {str(name): read(Section(body, s.where(f"backend_auth.{name}"), BackendAuth), backend_auth)
            for name, body in entries.items()}


def oauth_section(s: Section) -> OAuthConfig:
    keys = s.strings("keys")
    for i, key in enumerate(keys):
        s.check(f"keys[{i}]", parse_key, key)
    confirm = s.section("confirm_user", ConfirmUser)
    return OAuthConfig(keys=keys, link_seconds=s.number("link_seconds", minimum=10.0),
                       wait_seconds=s.number("wait_seconds", minimum=0.0),
                       refresh_margin_seconds=s.number("refresh_margin_seconds"),
                       timeout_seconds=s.number("timeout_seconds", minimum=0.1),
                       confirm_user=read(confirm, _confirm_user) if confirm.data else None)


def _confirm_user(s: Section) -> ConfirmUser:
    return ConfirmUser(client_id=s.required("client_id", str), client_secret=_secret(s), issuer=_url(s, "issuer"),
                       scopes=scopes(s, "scopes"), resource=s.get("resource", str))


def check_outbound(config: Config) -> None:
    """What outbound OAuth needs from elsewhere in the config."""
    for tenant in config.tenants.values():
        for name in tenant.backend_auth:
            if not isinstance(config.backend(name), HttpBackend):
                raise ConfigError(f"tenants.{tenant.name}.backend_auth.{name}: not an http backend of this config")
    modes = _modes(config)
    if "user_oauth" in modes and not config.server.public_url:
        raise ConfigError("server.public_url: required with user_oauth backends (their sign-in links and "
                          "the OAuth callback are built from it)")
    confirm = config.oauth.confirm_user
    if confirm is not None and not (confirm.issuer or config.auth.resource_metadata.authorization_servers):
        raise ConfigError("oauth.confirm_user.issuer: required (or auth.resource_metadata.authorization_servers)")
    if not config.oauth.keys and ("user_oauth" in modes or (modes and config.store.redis_url)):
        raise ConfigError("oauth.keys: required to seal stored tokens (user_oauth grants, and tokens the "
                          "replicas share through Redis); make one with `openssl rand -base64 32`")


def _modes(config: Config) -> set[str]:
    modes = {b.auth.mode for b in config.backends if isinstance(b, HttpBackend) and b.auth is not None}
    modes |= {auth.mode for tenant in config.tenants.values() for auth in tenant.backend_auth.values()}
    return modes - {"none"}


def _check_endpoints(s: Section, auth: BackendAuth) -> None:
    if auth.issuer is None and auth.token_url is None:
        raise ConfigError(f"{s.where('token_url')}: required (or issuer, whose metadata names it)")
    if auth.mode == "user_oauth" and auth.issuer is None and auth.authorization_url is None:
        raise ConfigError(f"{s.where('authorization_url')}: required for user_oauth (or issuer)")


def _url(s: Section, key: str) -> str | None:
    value = s.get(key, str)
    if value is not None:
        s.check(key, check_jwks_url, value)
    return value


def _secret(s: Section) -> str | None:
    if s.data.get("client_secret") == "":  # "${VAR:-}" with the variable unset
        raise ConfigError(f"{s.where('client_secret')}: empty; give it a value, or null for a public client")
    return s.get("client_secret", str)


def _choice(s: Section, key: str, choices: tuple[str, ...]) -> str | None:
    value = s.get(key, str)
    if value is not None and value not in choices:
        raise ConfigError(f"{s.where(key)}: must be one of {', '.join(choices)}")
    return value


def parse_key(text: str) -> bytes:
    """An `oauth.keys` entry: 32 bytes in base64 or base64url, padding optional; ValueError otherwise."""
    padded = text.strip() + "=" * (-len(text.strip()) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not base64") from None
    if len(raw) != KEY_BYTES:
        raise ValueError(f"must be {KEY_BYTES} bytes in base64 (`openssl rand -base64 32`), not {len(raw)}")
    return raw
