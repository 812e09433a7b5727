"""Starting what a scenario needs: stub backends, the SDK calc backend, gateways with generated configs,
and the JWT keys and tokens the auth scenario uses.

Gateway configs are plain dicts, checked with the gateway's own `parse_config` before they
are written, so a bad config fails here with its key path instead of as a dead subprocess.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bench.procs import (
    HOST,
    START_ATTEMPTS,
    START_TIMEOUT,
    Managed,
    ProcessSet,
    StartError,
    free_port,
    wait_port,
    wait_ready,
)
from bench.stub_backend import backend_path, backend_prefix, tool_names
from gateway.config import parse_config

ANONYMOUS_TENANT = "bench"
SEPARATOR = "__"
TOKEN_TTL = 3600
BENCH_ISSUER = "https://issuer.bench.invalid"
BENCH_AUDIENCE = "https://gateway.bench.invalid/mcp"


# ---------------------------------------------------------------- backends


@dataclass(frozen=True, slots=True)
class Backend:
    """One backend as the gateway sees it: name (= namespace), URL and tool names."""

    name: str
    url: str
    tools: tuple[str, ...]
    protocol: str = "auto"  # the gateway's `protocol` for it: "2026" speaks 2026-07-28 to the stub

    def exposed(self, tool: str) -> str:
        return f"{self.name}{SEPARATOR}{tool}"

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "transport": "http", "url": self.url, "timeout_seconds": 30,
                "max_connections": 100, **({"protocol": self.protocol} if self.protocol != "auto" else {})}


@dataclass(frozen=True, slots=True)
class StubProcess:
    managed: Managed
    backends: tuple[Backend, ...]


def start_stub(procs: ProcessSet, *, tools: int, count: int = 1, prefix: str = "echo", page_size: int = 0,
               name: str = "s", wrapper: Sequence[str] = ()) -> StubProcess:
    """One stub process serving `count` backends of `tools` echo tools each."""
    argv = ["-m", "bench.stub_backend", "--tools", str(tools), "--backends", str(count), "--prefix", prefix,
            "--page-size", str(page_size)]
    managed = _start_listening(procs, "stub", argv, wrapper)
    backends = tuple(
        Backend(f"{name}{i}" if count > 1 else name,
                f"http://{HOST}:{managed.port}{backend_path(i, count)}",
                tuple(tool_names(backend_prefix(prefix, i, count), tools)))
        for i in range(count))
    return StubProcess(managed, backends)


def start_calc(procs: ProcessSet) -> Backend:
    """The demo calc backend built with the official SDK (uvicorn, SSE replies, sessions)."""
    managed = _start_listening(procs, "calc", ["-m", "gateway.demo.calc", "--transport", "http"])
    return Backend("calc", f"http://{HOST}:{managed.port}/mcp", ("add",))


def _start_listening(procs: ProcessSet, name: str, argv: list[str], wrapper: Sequence[str] = ()) -> Managed:
    for attempt in range(1, START_ATTEMPTS + 1):
        port = free_port()
        managed = procs.spawn(name, [*argv, "--port", str(port)], port, wrapper=wrapper)
        try:
            wait_port(managed, START_TIMEOUT * (10 if wrapper else 1))
            return managed
        except StartError:
            procs.stop(managed)
            if attempt == START_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


# ---------------------------------------------------------------- gateways


@dataclass(frozen=True, slots=True)
class Gateway:
    managed: Managed
    ready_seconds: float

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.managed.port}/mcp"


def gateway_config(backends: list[Backend], *, tenants: dict[str, Any] | None = None,
                   auth: dict[str, Any] | None = None, page_size: int = 100,
                   store: dict[str, Any] | None = None) -> dict[str, Any]:
    """A gateway config: no token needed (anonymous tenant) unless `auth` and `tenants` say otherwise."""
    return {
        # Ready once a backend serves; a gateway without backends (scenario 4's baseline) once it listens.
        "server": {"host": HOST, "port": 0, "shutdown_grace_seconds": 2,
                   "ready_requires": "any_backend" if backends else "none"},
        "store": store or {"redis_url": None},
        "auth": auth or {"anonymous_tenant": ANONYMOUS_TENANT},
        "catalogue": {"separator": SEPARATOR, "page_size": page_size, "refresh_seconds": 600},
        "backends": [b.config() for b in backends],
        "tenants": tenants or {ANONYMOUS_TENANT: {"backends": ["*"]}},
        "logging": {"level": "info", "format": "json"},  # the production setting: one line per request
    }


def start_gateway(procs: ProcessSet, raw: dict[str, Any], *, workers: int = 1, name: str = "gateway",
                  env: dict[str, str] | None = None, timeout: float = 60.0, wrapper: Sequence[str] = ()) -> Gateway:
    """`python -m gateway serve` with `raw` as its config; returns once /readyz says 200."""
    parse_config(raw, {})  # fail here, with the key path, rather than in the subprocess
    path = procs.workdir / f"{name}-{secrets.token_hex(3)}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    for attempt in range(1, START_ATTEMPTS + 1):
        port = free_port()
        argv = ["-m", "gateway", "serve", "--config", str(path), "--port", str(port), "--workers", str(workers)]
        managed = procs.spawn(name, argv, port, env, wrapper)
        try:
            ready = wait_ready(managed, timeout, consecutive=4 if workers > 1 else 1)
            return Gateway(managed, ready)
        except StartError:
            procs.stop(managed)
            if attempt == START_ATTEMPTS or "address already in use" not in managed.log_tail().lower():
                raise
    raise AssertionError("unreachable")


# ---------------------------------------------------------------- JWT


@dataclass(frozen=True, slots=True)
class JwtKeys:
    """Keys made for this run only: an HS256 secret and an RS256 key pair (public key on disk)."""

    secret: str
    private_pem: bytes
    public_key_file: Path

    @classmethod
    def generate(cls, workdir: Path) -> JwtKeys:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption())
        public_file = workdir / "jwt-public.pem"
        public_file.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                              serialization.PublicFormat.SubjectPublicKeyInfo))
        return cls(secrets.token_hex(32), private_pem, public_file)

    def auth_config(self, algorithm: str) -> dict[str, Any]:
        if algorithm == "HS256":
            return {"jwt": {"algorithms": ["HS256"], "secret": self.secret}}
        return {"jwt": {"algorithms": [algorithm], "public_key_file": str(self.public_key_file),
                        "issuer": BENCH_ISSUER, "audience": BENCH_AUDIENCE}}

    def token(self, algorithm: str, tenant: str, subject: str) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {"tenant": tenant, "sub": subject, "iat": now, "exp": now + TOKEN_TTL}
        if algorithm == "HS256":
            return jwt.encode(claims, self.secret, algorithm=algorithm)
        # an asymmetric key is an identity provider's: an RFC 9068 access token, as one would issue
        claims |= {"iss": BENCH_ISSUER, "aud": BENCH_AUDIENCE, "client_id": "bench", "jti": secrets.token_hex(8)}
        return jwt.encode(claims, self.private_pem, algorithm=algorithm, headers={"typ": "at+jwt"})
