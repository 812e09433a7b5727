"""The hand-written reference pages name everything the code has: every error of the error tree
(docs/reference/errors.md) and every route of the app (docs/reference/endpoints.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from gateway.app import create_app
from gateway.config import parse_config
from gateway.protocol import errors

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reference"


def subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)


def test_every_error_of_the_tree_is_on_the_errors_page() -> None:
    page = (DOCS / "errors.md").read_text(encoding="utf-8")
    missing = [c.__name__ for c in subclasses(errors.GatewayError)
               if c.__module__ == errors.__name__ and f"`{c.__name__}`" not in page]
    assert not missing, f"add to docs/reference/errors.md: {missing}"
    reasons = [r.value for r in errors.FailureReason if f"| `{r.value}` |" not in page]
    assert not reasons, f"data.reason values missing from docs/reference/errors.md: {reasons}"


def test_every_route_is_on_the_endpoints_page() -> None:
    config = parse_config({"metrics": {"token": "a-scrape-token-of-16+"}, "server": {"path": "/mcp-x"}}, {})
    app = create_app(config)
    rows = [line for line in (DOCS / "endpoints.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `")]
    routes = {(route.method, route.resource.canonical.replace("/mcp-x", "{server.path}"))
              for route in app.router.routes() if route.method != "HEAD" and route.resource is not None}
    assert len(routes) >= 10
    missing = [f"{method} {path}" for method, path in sorted(routes)
               if not any(method in row.split("|")[1] and f"{path}`" in row.split("|")[1] for row in rows)]
    assert not missing, f"add a row to docs/reference/endpoints.md for: {missing}"
