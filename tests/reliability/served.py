"""A gateway served as its own process (`python -m gateway serve`) and driven with blocking sockets,
for hypothesis (which runs synchronously); and what every answer to hostile input must look like."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import orjson
from lifecycle.processes import API_KEY, HOST, REPO_ROOT, calc_backend, free_port, gateway_config, gateway_env

LEAKS = (b"Traceback", b'File "', b"/work/", b"site-packages", b"orjson", b"Exception", b"aiohttp")
READY_SECONDS = 30.0
AUTH = {"Authorization": f"Bearer {API_KEY}"}
MCP = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **AUTH}
GOOD_CALL = {"jsonrpc": "2.0", "id": "after", "method": "tools/call",
             "params": {"name": "calc__add", "arguments": {"a": 2, "b": 3}}}


class ServedGateway:
    """The gateway as its own process, driven with blocking sockets (hypothesis runs synchronously)."""

    def __init__(self, directory: Path, backends: list[dict[str, Any]] | None = None) -> None:
        """`backends`: the calc backend (the health check calls it) and these."""
        self.port = free_port()
        self.log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        config = gateway_config(directory, port=self.port, server={"max_body_bytes": 1024 * 1024},
                                backends=[calc_backend(), *(backends or [])])
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", str(self.port)],
            cwd=REPO_ROOT, env=gateway_env(), stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            start_new_session=True)
        self.session_id = ""
        self.legacy_session_id = ""

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output()
            with contextlib.suppress(OSError):
                if self.request("GET", "/readyz")[0] == 200:
                    self.session_id = self.initialize("2025-11-25")
                    self.legacy_session_id = self.initialize("2025-03-26")
                    return
            time.sleep(0.1)
        raise AssertionError(f"gateway not ready\n{self.output()}")

    def initialize(self, version: str) -> str:
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "hostile", "version": "1"}}
        status, headers, body = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params},
                                          session=False)
        assert status == 200, body
        return headers["Mcp-Session-Id"]

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection(HOST, self.port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    def post(self, message: Any, *, session: bool | str = True, **headers: str) -> tuple[int, dict[str, str], bytes]:
        # json, not orjson: the client must be able to send deeper nesting than orjson writes
        body = message if isinstance(message, bytes) else json.dumps(message, ensure_ascii=False).encode()
        extra = {**MCP, **headers}
        if session:
            extra["Mcp-Session-Id"] = session if isinstance(session, str) else self.session_id
        return self.request("POST", "/mcp", body, extra)

    def raw(self, data: bytes, *, read: bool = True) -> bytes:
        """Send raw bytes on a fresh connection; return what comes back until the gateway closes it.

        No half-close after sending: aiohttp treats EOF from the client as the end of the connection.
        """
        with socket.create_connection((HOST, self.port), timeout=15) as sock:
            sock.sendall(data)
            return read_all(sock) if read else b""

    def healthy(self) -> None:
        """Alive, live, and a well-formed call right after still succeeds."""
        assert self.process.poll() is None, self.output()
        assert self.request("GET", "/healthz")[0] == 200
        status, _, body = self.post(GOOD_CALL)
        assert status == 200, body
        assert orjson.loads(body)["result"]["structuredContent"] == {"result": 5.0}, body

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.log.close()


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def assert_clean(status: int, body: bytes) -> None:
    assert status < 500, (status, body[:500])
    assert not any(leak in body for leak in LEAKS), body[:500]
    if body and body.lstrip()[:1] in (b"{", b"["):
        replies = orjson.loads(body)
        for reply in replies if isinstance(replies, list) else [replies]:
            assert reply.get("jsonrpc") == "2.0", reply
            assert ("result" in reply) != ("error" in reply), reply
            if "error" in reply:
                assert len(reply["error"]["message"]) < 300
                assert reply["error"]["message"] != "Internal error", reply
