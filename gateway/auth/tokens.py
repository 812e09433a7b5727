"""Where a client's token comes from: header, query parameter or JSON-RPC params, in order."""

from __future__ import annotations

from typing import Any, Protocol

from gateway.config import AuthConfig


class Credentials(Protocol):
    """What a transport knows of the caller, before the JSON-RPC body is read.

    HTTP reads the Authorization header and the query string (lazily: most requests need only
    the header); stdio has one token fixed for the whole connection.
    """

    fixed: str | None
    """A token fixed for the connection: when set, no other source is looked at."""

    def authorization(self) -> str | None:
        """The Authorization header's value."""

    def query(self, name: str) -> str | None:
        """A query parameter's value."""

    def metadata_url(self) -> str | None:
        """Where a 401's challenge points clients (RFC 9728), if the transport has one."""

    def resource_url(self) -> str | None:
        """The resource identifier of the endpoint asked (RFC 8707): what an OAuth token's `aud` must name."""


def extract_token(credentials: Credentials, data: Any, config: AuthConfig) -> str | None:
    """The first token found in the enabled sources; `params.token` is removed from `data`.

    Returns "" for a present-but-empty credential (an empty bearer), so it is refused as
    invalid rather than treated as anonymous.
    """
    return find_token(credentials, data, config)[0]


def find_token(credentials: Credentials, data: Any, config: AuthConfig) -> tuple[str | None, str | None]:
    """`extract_token`'s token and the source it came from (`header`, `query`, `params`, or `fixed`)."""
    params_token = _pop_params_token(data)  # always stripped, so it is never forwarded
    if credentials.fixed is not None:
        return credentials.fixed.strip(), "fixed"
    for source in config.token_sources:
        if source == "header":
            token = _bearer(credentials.authorization())
        elif source == "query":
            token = credentials.query(config.query_param)
        else:
            token = params_token
        if token is not None:
            return token.strip(), source
    return None, None


def _bearer(header: str | None) -> str | None:
    if header is None:
        return None
    scheme, _, value = header.strip().partition(" ")
    return value if scheme.lower() == "bearer" else ""


def _pop_params_token(data: Any) -> str | None:
    """Remove `params.token` from a message, or from every message of a batch (first one wins)."""
    if isinstance(data, list):
        tokens = [_pop_params_token(item) for item in data]
        return next((t for t in tokens if t is not None), None)
    params = data.get("params") if isinstance(data, dict) else None
    if not isinstance(params, dict) or "token" not in params:
        return None
    token = params.pop("token")
    return token if isinstance(token, str) else ""
