"""gateway.protocol.errors: the error tree's codes come from spec, and backend failures carry a FailureReason."""

from __future__ import annotations

import orjson
import pytest

from gateway.protocol import jsonrpc, spec
from gateway.protocol.errors import BackendError, FailureReason, InvalidParams, MethodNotFound, ParseError
from gateway.upstream.base import UpstreamError


def test_each_error_carries_the_code_spec_names() -> None:
    assert (ParseError.code, MethodNotFound.code, InvalidParams.code, BackendError.code) == (
        spec.PARSE_ERROR, spec.METHOD_NOT_FOUND, spec.INVALID_PARAMS, spec.INTERNAL_ERROR)


@pytest.mark.parametrize(("reason", "message"), [
    (FailureReason.TIMEOUT, "Backend calc timed out"),
    (FailureReason.UNAVAILABLE, "Backend calc is unavailable"),
    (FailureReason.CIRCUIT_OPEN, "Backend calc is unavailable (circuit open)"),
    (FailureReason.OVERLOADED, "Backend calc is overloaded"),
    (FailureReason.BAD_RESPONSE, "Backend calc sent an invalid response"),
])
def test_a_backend_error_names_the_backend_and_sends_its_reason_as_a_plain_string(
        reason: FailureReason, message: str) -> None:
    reply = orjson.loads(jsonrpc.dumps(jsonrpc.error_response(7, BackendError("calc", reason, "secret detail"))))
    assert reply["error"] == {"code": -32603, "message": message, "data": {"backend": "calc", "reason": str(reason)}}


def test_reasons_are_the_strings_of_the_error_contract() -> None:
    # DESIGN.md's five, and the one a backend refusing the gateway's credential (or OAuth failing) gives
    assert [str(r) for r in FailureReason] == ["timeout", "unavailable", "circuit_open", "overloaded", "bad_response",
                                               "unauthorized"]
    assert FailureReason("timeout") is FailureReason.TIMEOUT


def test_a_reason_outside_the_tree_is_refused() -> None:
    with pytest.raises(ValueError):
        BackendError("calc", "exploded")
    with pytest.raises(ValueError):
        UpstreamError("exploded", "x")


def test_an_upstream_error_given_a_string_holds_the_enum() -> None:
    assert UpstreamError("timeout", "x").reason is FailureReason.TIMEOUT
