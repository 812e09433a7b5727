"""No access token, refresh token, authorization code, PKCE verifier, state or link id in any log line.

A full run, logged at debug level in JSON: a user signs in with the SDK (inbound OAuth), and
calls three views of one backend: with the gateway's client credentials, with the user's token
exchanged (the gateway as actor), and with the user's own grant, authorized by URL elicitation
and then refreshed; an exchange the server refuses, an OAuth token sent in the query string,
and a connection deleted (its tokens revoked). Then every secret of the run is looked for in the
logs: the client's tokens, every token the backend received, and everything the gateway stored
(opened with the test's key: verifiers, states, grants), the codes and states of the browser's
redirects, and the links.
"""

from __future__ import annotations

import asyncio
import io
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import orjson
import pytest
import structlog
from conftest import MCP_HEADERS
from mcp import MCPError

from gateway.config import LoggingConfig
from gateway.config.outbound import parse_key
from gateway.logs import configure_logging
from gateway.oauth.crypto import KeyRing, SealError
from gateway.oauth.store import MemoryStore
from oauth.authorization_server import AuthorizationServer
from oauth.conftest import SEAL_KEY, Ports, StartOnPort, identity_backend, oauth_gateway_config
from oauth.signing_in import User, signed_in_client

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    buffer = io.StringIO()
    configure_logging(LoggingConfig(level="debug", format="json"), stream=buffer)
    structlog.configure(cache_logger_on_first_use=False)
    _uncache()
    yield buffer
    structlog.reset_defaults()
    _uncache()


def _uncache() -> None:
    """Loggers bound before the capture was configured follow it (see tests/e2e/test_no_secrets_in_logs.py)."""
    for name, module in list(sys.modules.items()):
        if name == "gateway" or name.startswith("gateway."):
            for value in list(vars(module).values()):
                if isinstance(value, structlog._config.BoundLoggerLazyProxy):
                    vars(value).pop("bind", None)


@pytest.fixture
def stored(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every (key, value) the gateway's memory store was given."""
    seen: list[tuple[str, str]] = []
    original = MemoryStore.set

    async def recording(self: MemoryStore, key: str, value: str, ttl: float | None = None) -> None:
        seen.append((key, value))
        await original(self, key, value, ttl)

    monkeypatch.setattr(MemoryStore, "set", recording)
    return seen


def opened(stored: list[tuple[str, str]]) -> list[str]:
    """The secrets inside what was stored: every string value of every record the test's key opens."""
    ring, found = KeyRing([parse_key(SEAL_KEY)]), []
    for key, value in stored:
        try:
            record = orjson.loads(ring.open(value, key)[0])
        except (SealError, orjson.JSONDecodeError):
            continue
        found += [v for k, v in record.items() if isinstance(v, str) and k not in ("tenant", "subject", "backend",
                                                                                    "scope", "resource")]
    return found


async def test_a_full_run_logs_no_token_code_verifier_or_state(
        ports: Ports, provider: AuthorizationServer, identity: Any, gateway_on: StartOnPort,
        logs: io.StringIO, stored: list[tuple[str, str]]) -> None:
    backends = [dict(identity_backend(ports, "client_credentials"), name="service"),
                dict(identity_backend(ports, "token_exchange", actor=True), name="asuser"),
                dict(identity_backend(ports, "token_exchange", scopes=["backend:admin"]), name="refused"),
                dict(identity_backend(ports, "user_oauth", catalogue="client_credentials"), name="mine")]
    config = oauth_gateway_config(ports, backends, server={"public_url": ports.resource},
                                  oauth={"keys": [SEAL_KEY], "refresh_margin_seconds": 297})
    running_gateway = await gateway_on(config, ports.gateway)
    base = running_gateway.base.rstrip("/")
    alice = User(provider, "alice")
    async with signed_in_client(running_gateway.url, alice.sign_in, elicitation_callback=alice.elicited) as client:
        for name in ("service", "asuser", "mine"):
            assert not (await client.call_tool(f"{name}__whoami", {})).is_error
        with pytest.raises(MCPError, match="token exchange failed: invalid_scope"):
            await client.call_tool("refused__whoami", {})
        await asyncio.sleep(3.1)  # the grant nears its end: refreshed
        assert not (await client.call_tool("mine__whoami", {})).is_error
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{running_gateway.url}?token={alice.token}", data=b"{}", headers=MCP_HEADERS) as refused:
            assert refused.status == 401
        async with http.delete(f"{base}/oauth/connections/mine",
                               headers={"Authorization": f"Bearer {alice.token}"}) as deleted:
            assert deleted.status == 204
    await running_gateway.server.close()

    secrets = _secrets(alice, identity.stderr_text(), stored)
    text = logs.getvalue()
    assert '"event": "oauth_connected"' in text or '"event":"oauth_connected"' in text  # the run was logged
    found = [secret[:12] + "..." for secret in secrets if secret in text]
    assert found == [], f"secrets in the log: {found}"
    assert "code=" not in text and "state=" not in text and "token=" not in text


def _secrets(user: User, backend_stderr: str, stored: list[tuple[str, str]]) -> set[str]:
    tokens = user.sign_in.storage.tokens
    assert tokens is not None
    found = {tokens.access_token, *([tokens.refresh_token] if tokens.refresh_token else [])}
    seen = {line.split(" ", 1)[1] for line in backend_stderr.splitlines() if line.startswith("token-seen ")}
    assert len(seen) >= 4  # the gateway's own, the exchanged one, the user's grant and its refresh
    found |= seen | set(opened(stored))
    for url in user.sign_in.authorizations + [asked.url for asked in user.asked] + user.visited:
        query = parse_qs(urlsplit(url).query)
        found |= {values[0] for key, values in query.items() if key in ("state", "code", "code_challenge")}
        if "/oauth/connect/" in url:
            found.add(url.rsplit("/", 1)[1])
    found |= {part for token in list(found) for part in token.split(".")[1:] if len(part) >= 16}
    return {secret for secret in found if len(secret) >= 16}
