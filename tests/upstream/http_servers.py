"""Servers and clients for the upstream HTTP client contract suite (tests/upstream/test_client_*.py).

Echo is a well-behaved aiohttp server; `scripted` runs a raw socket script per connection for
replies aiohttp would never send; `client_for` makes a client of each implementation in turn.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from backend_fixtures import free_port
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gateway.upstream.http.client import ClientOptions, HttpTransport, Response
from gateway.upstream.http.clients import HTTP_CLIENTS, open_client


async def body_of(resp: Response) -> tuple[int, bytes]:
    return resp.status, await resp.read()


async def status_only(resp: Response) -> int:
    return resp.status


# ---------------------------------------------------------------- servers


class Echo:
    """An aiohttp server echoing method, path, headers and body; counts its TCP connections."""

    def __init__(self) -> None:
        self.connections: set[int] = set()
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self, app: web.Application | None = None, ssl_context: ssl.SSLContext | None = None,
                    scheme: str = "http") -> str:
        app = app or web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        port = free_port()
        await web.TCPSite(self.runner, "127.0.0.1", port, ssl_context=ssl_context).start()
        self.url = f"{scheme}://127.0.0.1:{port}/mcp?x=1"
        return self.url

    async def handle(self, request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        self.connections.add(id(request.transport))
        if request.path == "/big":
            size = int(request.query["size"])
            response = web.StreamResponse()
            response.enable_chunked_encoding()
            await response.prepare(request)
            for _ in range(size // 65536):
                await response.write(b"x" * 65536)
            await response.write_eof()
            return response
        body = await request.read()
        text = f"{request.method} {request.path_qs} {request.headers.get('X-Test', '-')} ".encode() + body
        return web.Response(body=text, headers={"X-Seen-Host": request.host})

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.fixture
async def echo() -> AsyncIterator[Echo]:
    server = Echo()
    await server.start()
    yield server
    await server.stop()


Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def scripted() -> AsyncIterator[Callable[[Script], Awaitable[str]]]:
    """A raw TCP server whose connections each run `script` (for replies aiohttp would not send)."""
    servers: list[asyncio.Server] = []

    async def start(script: Script) -> str:
        server = await asyncio.start_server(script, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


async def read_head(reader: asyncio.StreamReader, *, keep_body: bool = False) -> bytes:
    """Read one request; return its head (and its body after the head, with `keep_body`)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    body = await reader.readexactly(length) if length else b""
    return head + body if keep_body else head


MakeClient = Callable[..., HttpTransport]


@pytest.fixture(params=HTTP_CLIENTS)
def kind(request: pytest.FixtureRequest) -> str:
    """Every test that makes a client runs once per implementation."""
    return str(request.param)


@pytest.fixture
async def client_for(kind: str) -> AsyncIterator[MakeClient]:
    clients: list[HttpTransport] = []

    def make(url: str, max_connections: int = 4, **options: Any) -> HttpTransport:
        client = open_client(kind, url, ClientOptions(max_connections=max_connections, **options))
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (as an IP SAN), and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path
