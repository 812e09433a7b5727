"""Unit tests: one file per module, pure inputs and outputs, real aiohttp where a socket is needed."""
