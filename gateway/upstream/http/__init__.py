"""Streamable HTTP backends: the HTTP client seam (builtin or aiohttp), sessions, eras, listen streams."""
