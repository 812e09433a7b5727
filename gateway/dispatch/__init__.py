"""The MCP methods, free of any transport (see dispatcher.py)."""

from gateway.dispatch.dispatcher import SERVER_INFO, Dispatcher

__all__ = ["SERVER_INFO", "Dispatcher"]
