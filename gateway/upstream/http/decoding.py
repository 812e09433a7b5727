"""Content-Encoding: gzip and deflate bodies decoded as they stream, in bounded pieces.

A backend may compress a reply even unasked; decoded here it reaches the JSON parser as JSON.
Output comes in pieces of at most PIECE_BYTES, so a small compressed chunk that expands to
gigabytes is seen, and cut, by the reader's size limit long before it is all in memory.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

from gateway.upstream.http.client import BadReply

PIECE_BYTES = 64 * 1024
ENCODINGS = ("gzip", "x-gzip", "deflate")
"""What `Accept-Encoding` offers and this module decodes; `identity` needs nothing."""


def needs_decoding(content_encoding: str) -> bool:
    """Whether a reply with this Content-Encoding must go through `decoded`; unknown ones are refused."""
    coding = content_encoding.strip().lower()
    if coding in ("", "identity"):
        return False
    if coding not in ENCODINGS:
        raise BadReply(f"unsupported Content-Encoding {content_encoding!r}")
    return True


async def decoded(chunks: AsyncIterator[bytes], content_encoding: str) -> AsyncIterator[bytes]:
    """The decoded body of `chunks`, whose Content-Encoding is one of ENCODINGS."""
    coding = content_encoding.strip().lower()
    # gzip: a gzip header; deflate: the zlib format as RFC 9110 says, or raw deflate as some servers send.
    wbits = 16 + zlib.MAX_WBITS if coding != "deflate" else zlib.MAX_WBITS
    inflater, started = zlib.decompressobj(wbits), False
    try:
        async for chunk in chunks:
            if not started and coding == "deflate" and chunk and (chunk[0] & 0x0F) != 8:
                inflater = zlib.decompressobj(-zlib.MAX_WBITS)  # no zlib header: raw deflate
            started = True
            for piece in _pieces(inflater, chunk):
                yield piece
        tail = inflater.flush()
    except zlib.error as exc:
        raise BadReply(f"{coding} body does not decode: {exc}") from exc
    if tail:
        yield tail


def _pieces(inflater: Any, data: bytes) -> Iterator[bytes]:
    """Decoded `data` in pieces, each made only when the previous one has been taken."""
    while data:
        piece = inflater.decompress(data, PIECE_BYTES)
        data = inflater.unconsumed_tail
        if piece:
            yield piece
