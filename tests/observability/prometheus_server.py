"""A real Prometheus server for tests: own config, own storage, loopback port, stopped afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import aiohttp
import yaml
from backend_fixtures import HOST, free_port, stop_process
from conftest import SCRAPE_TOKEN

START_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 10.0


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


def scrape_config(target: str, rule_files: list[Path]) -> dict[str, Any]:
    """Scrape `target` every second and evaluate the rules as often (the test has seconds, not hours)."""
    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [{"job_name": "mcp-gateway", "static_configs": [{"targets": [target]}],
                            "authorization": {"credentials": SCRAPE_TOKEN}}],
    }


@dataclass
class PrometheusServer:
    workdir: Path
    config: dict[str, Any]
    port: int = field(default_factory=free_port)
    process: asyncio.subprocess.Process | None = None
    _log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    async def start(self) -> None:
        binary = prometheus_binary()
        assert binary is not None
        config_file = self.workdir / "prometheus.yml"
        config_file.write_text(yaml.safe_dump(self.config))
        self._log = (self.workdir / "prometheus.log").open("wb")
        self.process = await asyncio.create_subprocess_exec(
            binary, f"--config.file={config_file}", f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address={HOST}:{self.port}", "--enable-feature=exemplar-storage",
            stdin=asyncio.subprocess.DEVNULL, stdout=self._log, stderr=self._log)
        await self._wait_ready()

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                assert self.process is not None and self.process.returncode is None, self.log_text()
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(f"{self.url}/-/ready") as response:
                        if response.status == 200:
                            return
                await asyncio.sleep(0.2)
        raise AssertionError(f"prometheus not ready in {START_TIMEOUT_SECONDS}s\n{self.log_text()}")

    async def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            await stop_process(process, STOP_TIMEOUT_SECONDS)
        if self._log is not None:
            self._log.close()

    def log_text(self) -> str:
        path = self.workdir / "prometheus.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    async def api(self, path: str, **params: str) -> Any:
        """GET an HTTP API endpoint; returns `data` of a success, raises with Prometheus's error."""
        async with aiohttp.ClientSession() as http, http.get(f"{self.url}/api/v1/{path}", params=params) as response:
            body = await response.json()
        if body.get("status") != "success":
            raise AssertionError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    async def query(self, expr: str) -> list[dict[str, Any]]:
        data = await self.api("query", query=expr)
        return data["result"] if data["resultType"] in ("vector", "matrix") else [data["result"]]
