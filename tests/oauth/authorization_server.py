"""A real authorization server for the tests: npm `oidc-provider`, run by authorization_server.mjs.

Installed once into `.oidc-provider/` at the repository root (git-ignored; reused while the pins
match), with Node 22 from the npm package `node`, the runtime oidc-provider supports; only `npm`
has to be on PATH. Without npm these tests skip, unless MCPGW_REQUIRE_OIDC=1 (set by `.ci/run`)
makes that a failure.

`Browser` plays the user's browser: it follows redirects with a cookie jar and answers the
provider's development interactions (the login form, then the consent form) as a given user.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import aiohttp
from npm_packages import ensure

PROVIDER_VERSION = "9.13.3"
NODE_VERSION = "22.23.3"
REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_DIR = REPO_ROOT / ".oidc-provider"
SCRIPT = Path(__file__).with_name("authorization_server.mjs")
START_TIMEOUT_SECONDS = 20.0
REQUIRE_ENV = "MCPGW_REQUIRE_OIDC"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


def _node() -> Path:
    return INSTALL_DIR / "node_modules" / ".bin" / "node"


def _installed() -> bool:
    package = INSTALL_DIR / "node_modules" / "oidc-provider" / "package.json"
    try:
        version = json.loads(package.read_text())["version"]
        out = subprocess.run([_node(), "--version"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, ValueError, KeyError, subprocess.SubprocessError):
        return False
    return version == PROVIDER_VERSION and out.stdout.strip() == f"v{NODE_VERSION}"


def ensure_installed() -> Path:
    """The node binary that runs the provider, installing the pinned packages first if needed."""
    ensure(INSTALL_DIR, [f"node@{NODE_VERSION}", f"oidc-provider@{PROVIDER_VERSION}"], installed=_installed,
           what=f"oidc-provider {PROVIDER_VERSION} with Node {NODE_VERSION}", require_env=REQUIRE_ENV)
    return _node()


@dataclass
class AuthorizationServer:
    """One running provider; `issuer` is its URL."""

    issuer: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/jwks"

    async def counters(self) -> dict[str, Any]:
        async with aiohttp.ClientSession() as http, http.get(f"{self.issuer}/_test/counters") as response:
            return dict(await response.json())

    async def grants(self, grant_type: str, subject: str | None = None) -> int:
        """How many tokens the provider issued with `grant_type` (to `subject` only, if given)."""
        counters = await self.counters()
        if subject is None:
            return int(counters["grants"].get(grant_type, 0))
        return int(counters["bySubject"].get(f"{grant_type} {subject}", 0))

    async def token(self, client_id: str, client_secret: str, **form: str) -> dict[str, Any]:
        """A token endpoint request authenticated with client_secret_basic; the reply's JSON."""
        auth = aiohttp.BasicAuth(client_id, client_secret)
        async with aiohttp.ClientSession() as http, http.post(self.token_endpoint, data=form, auth=auth) as response:
            return dict(await response.json())

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def settings(port: int, *, resources: dict[str, dict[str, Any]], clients: list[dict[str, Any]] | None = None,
             accounts: dict[str, dict[str, Any]] | None = None,
             exchange_audiences: list[str] | None = None) -> dict[str, Any]:
    """What authorization_server.mjs reads: see its header."""
    return {"issuer": f"http://127.0.0.1:{port}", "port": port, "resources": resources, "clients": clients or [],
            "accounts": accounts or {}, "exchange": {"subject_audiences": exchange_audiences or []}}


@contextmanager
def running(config: dict[str, Any]) -> Iterator[AuthorizationServer]:
    """Start the provider with `config` (see `settings`), wait until it listens, stop it at the end."""
    node = ensure_installed()
    shutil.copy(SCRIPT, INSTALL_DIR / SCRIPT.name)  # beside node_modules, so its imports resolve
    with tempfile.TemporaryDirectory() as folder:
        settings_path, log_path = Path(folder, "settings.json"), Path(folder, "provider.log")
        settings_path.write_text(json.dumps(config))
        with open(log_path, "wb") as log:
            process = subprocess.Popen([str(node), str(INSTALL_DIR / SCRIPT.name), str(settings_path)],
                                       cwd=INSTALL_DIR, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL)
        server = AuthorizationServer(config["issuer"], process, log_path)
        try:
            _wait_listening(server)
            yield server
        finally:
            server.stop()


def _wait_listening(server: AuthorizationServer) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if f"listening {server.issuer}" in server.log():
            return
        if server.process.poll() is not None:
            raise RuntimeError(f"the authorization server exited: {server.log()[-2000:]}")
        time.sleep(0.05)
    raise RuntimeError(f"the authorization server did not start: {server.log()[-2000:]}")


@dataclass
class Browser:
    """A user's browser: cookies, redirects, and the provider's login and consent forms.

    `visit` follows a chain of redirects from `url`, signing in as `user` and consenting on the
    provider's interaction pages, until a page that is not a redirect (its status and text), or
    a redirect to `stop_at` (returned without being followed: a native client's redirect URI).
    """

    issuer: str
    user: str
    visited: list[str] = field(default_factory=list)
    session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Browser:
        self.session = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.session is not None
        await self.session.close()

    async def visit(self, url: str, *, stop_at: str | None = None, max_steps: int = 20) -> tuple[int, str, str]:
        """(status, final URL, body) of the page the chain ends on."""
        assert self.session is not None
        method, data = "GET", None
        for _ in range(max_steps):
            if stop_at is not None and url.startswith(stop_at):
                return 302, url, ""
            self.visited.append(url)
            async with self.session.request(method, url, data=data, allow_redirects=False) as response:
                body = await response.text()
                location = response.headers.get("Location")
            if location is not None and response.status in (301, 302, 303, 307, 308):
                url, method, data = urljoin(url, location), "GET", None
            elif self._interaction(url) and response.status == 200:
                method, data = "POST", self._answer(body)
            else:
                return response.status, url, body
        raise AssertionError(f"too many steps: {self.visited}")

    def _interaction(self, url: str) -> bool:
        return url.startswith(f"{self.issuer}/interaction/")

    def _answer(self, page: str) -> dict[str, str]:
        """The form the provider shows: sign in as the user, or grant what the client asked."""
        if 'name="prompt" value="login"' in page:
            return {"prompt": "login", "login": self.user, "password": "any"}
        if 'name="prompt" value="consent"' in page:
            return {"prompt": "consent"}
        raise AssertionError(f"an interaction page the browser cannot answer: {page[:500]}")


def query_of(url: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}
