"""Fixtures for the front-door tests: served gateways, stopped (with their children) afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from backend_fixtures import free_port
from lifecycle.processes import GatewayProcess

from hardening.helpers import start_process, write_config


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Any]:
    """`await served(open_files=None, env=None, **sections)`: a gateway process with the two tenants, ready."""
    started: list[GatewayProcess] = []

    async def start(*, open_files: int | None = None, env: dict[str, str] | None = None,
                    **sections: Any) -> GatewayProcess:
        port = free_port()
        gateway = await start_process(write_config(tmp_path, port, **sections), port, open_files=open_files, env=env)
        started.append(gateway)
        return gateway

    yield start
    for gateway in started:
        await gateway.stop()
