"""Fixtures for tests that run the gateway as a real process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle.processes import GatewayProcess


@pytest.fixture
async def start_gateway() -> AsyncIterator[Any]:
    """`await start_gateway(config, port, *args)`: a running gateway, killed (with its tree) afterwards."""
    started: list[GatewayProcess] = []

    async def start(config: Path, port: int, *args: str, ready: bool = True) -> GatewayProcess:
        gateway = await GatewayProcess.start(config, port, *args)
        started.append(gateway)
        if ready:
            await gateway.wait_ready()
            gateway.tree()
        return gateway

    yield start
    for gateway in started:
        await gateway.stop()
