"""An official-SDK MCP server that checks its bearer tokens against the test authorization server.

Not a test module: tests run it as a process (`--transport http --port N --issuer URL`). Its
resource is `http://127.0.0.1:N/mcp`: a token must be an RFC 9068 access token of that issuer
with that audience (verified with the issuer's JWKS), else the SDK's bearer middleware answers
401. `whoami` says who the token speaks for: its subject, client, actor (RFC 8693 `act`), scopes
and id (`jti`), so a test sees exactly what the gateway sent. Each new token it accepts is written to
stderr (`token-seen ...`), for tests that check no token reached the gateway's logs. The SDK binds each session to the
token's (client, issuer, subject), as any careful backend does.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio
import jwt
import uvicorn
from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings


class JwksVerifier:
    """RS256 access tokens of `issuer` for `audience`, keys from the issuer's JWKS."""

    def __init__(self, issuer: str, audience: str) -> None:
        self.issuer = issuer
        self.audience = audience
        self.keys = jwt.PyJWKClient(f"{issuer}/jwks", cache_keys=True)
        self.seen: set[str] = set()

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            key = await anyio.to_thread.run_sync(self.keys.get_signing_key_from_jwt, token)
            claims = jwt.decode(token, key.key, algorithms=["RS256"], audience=self.audience, issuer=self.issuer,
                                options={"require": ["exp", "iat", "sub", "client_id", "jti"]})
        except jwt.PyJWTError as exc:
            print(f"refused a token: {type(exc).__name__}", file=sys.stderr, flush=True)
            return None
        if jwt.get_unverified_header(token).get("typ") != "at+jwt":
            return None
        if token not in self.seen:  # for tests that check where tokens went (never into the gateway's logs)
            self.seen.add(token)
            print(f"token-seen {token}", file=sys.stderr, flush=True)
        return AccessToken(token=token, client_id=claims["client_id"], scopes=claims.get("scope", "").split(),
                           expires_at=claims["exp"], resource=self.audience, subject=claims["sub"], claims=claims)


def build(issuer: str, resource: str) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer(
        "identity", token_verifier=JwksVerifier(issuer, resource),
        auth=AuthSettings(issuer_url=issuer, resource_server_url=resource))  # type: ignore[arg-type]

    @server.tool()
    def whoami() -> dict[str, Any]:
        """Who the bearer token speaks for."""
        token = get_access_token()
        assert token is not None and token.claims is not None
        return {"sub": token.subject, "client_id": token.client_id, "act": token.claims.get("act"),
                "scope": sorted(token.scopes), "jti": token.claims.get("jti"), "aud": token.claims.get("aud")}

    return server


async def serve(server: MCPServer[Any], port: int) -> None:
    app = server.streamable_http_app(streamable_http_path="/mcp", json_response=False, stateless_http=False,
                                     host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=1)
    await uvicorn.Server(config).serve()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", default="http")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--issuer", required=True)
    args = parser.parse_args()
    anyio.run(serve, build(args.issuer, f"http://127.0.0.1:{args.port}/mcp"), args.port)


if __name__ == "__main__":
    main()
