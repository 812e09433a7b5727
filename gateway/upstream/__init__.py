"""Connections from the gateway to its backends (Streamable HTTP clients and stdio children)."""

from gateway.upstream.base import Upstream, UpstreamError
from gateway.upstream.http.upstream import HttpUpstream
from gateway.upstream.stdio.upstream import StdioUpstream

__all__ = ["HttpUpstream", "StdioUpstream", "Upstream", "UpstreamError"]
