"""examples/replicas-redis.yaml does what its header says: two gateways started from it share one
Redis, so a session opened on one serves tools/list and tools/call on the other.

The example is loaded as an operator would run it, with only what differs on a test machine
overridden through MCPGW_ variables: the key prefix (this test's own), the backend's URL (a real
MCP server on 127.0.0.1) and no metrics port (two replicas on one host would share it).
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from backend_fixtures import StartBackend
from conftest import StartGateway
from shared_state.conftest import needs_shared_redis, redis_prefix  # noqa: F401 - the fixture
from shared_state.helpers import SHARED_REDIS_URL

from gateway.config import load_config

pytestmark = [pytest.mark.timeout(60), needs_shared_redis]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "replicas-redis.yaml"


async def test_two_replicas_of_the_example_share_a_session(redis_prefix: str, gateway: StartGateway,  # noqa: F811
                                                           http_backend: StartBackend, raw_client: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    search = await http_backend("calc")
    jwt_secret = secrets.token_urlsafe(48)
    for name, value in {"REDIS_URL": SHARED_REDIS_URL, "MCPGW_JWT_SECRET": jwt_secret,
                        "MCPGW_MRTR_SECRET": secrets.token_urlsafe(48), "SEARCH_TOKEN": "search-token",
                        "MCPGW_STORE__KEY_PREFIX": f"'{redis_prefix}'",  # an override is read as YAML
                        "MCPGW_METRICS__PORT": "null",
                        "MCPGW_BACKENDS__search__URL": search.url}.items():
        monkeypatch.setenv(name, value)
    config = load_config(EXAMPLE)
    assert config.store.redis_url == SHARED_REDIS_URL and config.store.required
    a, b = await gateway(config), await gateway(config)

    now = int(time.time())
    token = jwt.encode({"tenant": "acme", "sub": "alice", "iss": "https://mcp.example.com", "iat": now,
                        "exp": now + 300}, jwt_secret, algorithm="HS256")
    on_a = raw_client(a.url, token)
    await on_a.initialize()
    on_b = raw_client(b.url, token)
    on_b.session_id = on_a.session_id  # the session a opened, used on b

    tools = await on_b.call("tools/list")
    assert "search__add" in {tool["name"] for tool in tools["result"]["tools"]}
    called = await on_b.call("tools/call", {"name": "search__add", "arguments": {"a": 2, "b": 3}})
    assert called["result"]["isError"] is False and "5" in called["result"]["content"][0]["text"]

    unsigned = raw_client(b.url, jwt.encode({"tenant": "acme", "sub": "alice", "exp": now + 300}, jwt_secret))
    status, _, _ = await unsigned.post(unsigned.request("ping"))
    assert status == 401  # the example requires the issuer it names
