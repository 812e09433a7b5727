"""Fixtures for the status page in a real browser: Chromium, and a real gateway with real backends."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import READY_TIMEOUT

from browser.chromium import REQUIRE_ENV, Browser, chromium_missing
from browser.served import StatusGateway, gateway_config
from gateway import keys
from gateway.app import create_app
from gateway.config import load_config


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    missing = chromium_missing()
    if missing:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {missing}")
        pytest.skip(missing)
    started = Browser()
    started.start()
    yield started
    started.close()


@pytest.fixture
async def status_gateway(aiohttp_server: Any, tmp_path: Path) -> Any:
    """`await status_gateway(**options)`: the app of `browser.served.gateway_config(tmp_path, **options)` on
    a real port, reloadable from its file, its first catalogue built."""

    async def start(**options: Any) -> StatusGateway:
        path = tmp_path / "gateway.yaml"
        path.write_text(yaml.safe_dump(gateway_config(tmp_path, **options)))
        app = create_app(load_config(path, {}), reload_source=lambda: load_config(path, {}))
        server = await aiohttp_server(app)
        await asyncio.wait_for(app[keys.CATALOGUE].ready.wait(), READY_TIMEOUT)
        return StatusGateway(app, str(server.make_url("")).rstrip("/"), path, tmp_path)

    return start
