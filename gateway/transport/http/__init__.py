"""The Streamable HTTP transport: the endpoint, GET streams, Origin checks, connection bounds, error replies."""
