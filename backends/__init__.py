"""Demo MCP servers built with the official ``mcp`` SDK; run one with ``python -m gateway.demo.<name>``."""
