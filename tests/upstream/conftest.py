"""Fixtures of the upstream suites: the HTTP client contract (upstream/http_servers.py), stdio upstreams
(upstream/stdio_fixtures.py)."""

from upstream.http_servers import client_for, echo, kind, scripted  # noqa: F401 - fixtures
from upstream.stdio_fixtures import make_stdio  # noqa: F401 - a fixture
