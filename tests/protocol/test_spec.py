"""gateway.protocol.spec is the one vocabulary: no other module writes a JSON-RPC error code as a number."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

from gateway.protocol import spec

GATEWAY = Path(__file__).resolve().parents[2] / "gateway"
SPEC = GATEWAY / "protocol" / "spec.py"


def error_code_literals(source: str) -> list[int]:
    """Negative numbers in the JSON-RPC error code ranges, written in code (not comments or strings)."""
    found, previous = [], None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NUMBER and previous is not None and previous.string == "-":
            value = -int(token.string) if token.string.isdigit() else 0
            if -32768 <= value <= -32000:
                found.append(value)
        if token.type not in (tokenize.NL, tokenize.COMMENT):
            previous = token
    return found


def test_no_module_but_spec_writes_an_error_code_as_a_number() -> None:
    offenders = {str(p.relative_to(GATEWAY)): codes for p in sorted(GATEWAY.rglob("*.py"))
                 if p != SPEC and (codes := error_code_literals(p.read_text(encoding="utf-8")))}
    assert offenders == {}


def test_the_scan_finds_a_code_written_in_code_but_not_in_a_comment_or_string() -> None:
    assert error_code_literals('x = {"code": -32601}  # -32602\ny = "-32700"\n') == [-32601]


def test_the_error_codes_are_json_rpc_and_mcp_ones() -> None:
    assert (spec.PARSE_ERROR, spec.INVALID_REQUEST, spec.METHOD_NOT_FOUND, spec.INVALID_PARAMS,
            spec.INTERNAL_ERROR) == (-32700, -32600, -32601, -32602, -32603)
    assert (spec.HEADER_MISMATCH, spec.MISSING_CLIENT_CAPABILITY, spec.UNSUPPORTED_PROTOCOL_VERSION) == (
        -32020, -32021, -32022)

