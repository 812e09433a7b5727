"""A fixture that starts stdio upstreams: `make_stdio(command, **options)` (fast restarts unless told otherwise)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from backend_fixtures import REPO_ROOT

from gateway.upstream import StdioUpstream

FAST_RESTART = (0.1, 1.0)
CLIENT_INFO = {"name": "gateway-tests", "version": "0"}

MakeStdio = Callable[..., Awaitable[StdioUpstream]]


@pytest.fixture
async def make_stdio() -> AsyncIterator[MakeStdio]:
    """Start stdio upstreams (fast restarts unless told otherwise); close them all after."""
    made: list[StdioUpstream] = []

    async def make(command: list[str], **options: Any) -> StdioUpstream:
        options.setdefault("restart_delays", FAST_RESTART)
        env = options.pop("env", {})
        upstream = StdioUpstream(
            "test", command=command, env=env, cwd=str(REPO_ROOT), client_info=CLIENT_INFO, **options
        )
        made.append(upstream)
        await upstream.start()
        return upstream

    yield make
    for upstream in made:
        await upstream.close()
