"""Fixtures of the upstream HTTP client contract suite (defined in upstream/http_servers.py)."""

from upstream.http_servers import client_for, echo, kind, scripted  # noqa: F401 - fixtures
