"""What the tracing tests share: the traced SDK backend, a traced gateway config, the SDK client."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
from conftest import make_config
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.config import Config
from tracing.collector import Received

BACKEND = Path(__file__).with_name("traced_backend.py")
GATEWAY = "mcp-gateway"
"""The gateway's service.name."""


@asynccontextmanager
async def sdk_client(url: str, token: str, mode: str = "legacy", **callbacks: Any) -> AsyncIterator[Client]:
    """The official SDK client: `legacy` keeps to the handshake era, `auto` speaks 2026-07-28 to the gateway."""
    async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30)) as http,
                Client(streamable_http_client(url, http_client=http), mode=mode,  # type: ignore[arg-type]
                       read_timeout_seconds=30, **callbacks) as client):
        yield client


def traced_config(collector_url: str, backends: list[dict[str, Any]], **tracing: Any) -> Config:
    return make_config(backends, tracing={"enabled": True, "endpoint": collector_url, **tracing})


def stdio_traced(collector_url: str) -> dict[str, Any]:
    return {"name": "traced", "transport": "stdio", "command": [sys.executable, str(BACKEND), "--transport", "stdio"],
            "env": {"TRACED_BACKEND_OTLP": collector_url + "/v1/traces"}}


def one(spans: list[Received]) -> Received:
    assert len(spans) == 1, spans
    return spans[0]
