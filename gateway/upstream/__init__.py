"""Connections from the gateway to its backends (Streamable HTTP clients and stdio children)."""

from gateway.upstream.base import Upstream, UpstreamError
from gateway.upstream.http import HttpUpstream
from gateway.upstream.stdio import StdioUpstream

__all__ = ["HttpUpstream", "StdioUpstream", "Upstream", "UpstreamError"]
