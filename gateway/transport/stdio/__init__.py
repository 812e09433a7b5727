"""The stdio transport of `mcp-gateway stdio`: one local client over stdin and stdout."""
