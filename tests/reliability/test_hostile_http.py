"""Hostile input on the wire: a served gateway (`python -m gateway serve`) on 127.0.0.1 takes abuse.

Random and mutated JSON-RPC, deep nesting, huge numbers and strings, invalid UTF-8, wrong
content types, header injection, huge headers, oversize bodies and clients that trickle
their bytes: never an HTTP 500, never a traceback or internal detail in a reply, the
process stays healthy and a well-formed request right after still succeeds. At the end
the gateway's own log must hold no unexpected exception either.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from lifecycle.processes import API_KEY, HOST

from reliability.served import GOOD_CALL, LEAKS, ServedGateway, assert_clean, read_all
from reliability.strategies import any_message, modern_requests

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    gateway = ServedGateway(tmp_path_factory.mktemp("hostile"))
    try:
        gateway.wait_ready()
        yield gateway
        log = gateway.output()
        for marker in ("request_failed", "dispatch_failed", "Internal error"):
            assert marker not in log, f"the gateway logged an unexpected exception:\n{log[-4000:]}"
    finally:
        gateway.stop()


# ---------------------------------------------------------------- random and mutated messages

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@FUZZ
@given(message=any_message, legacy=st.booleans())
def test_random_messages_get_clean_answers(served: ServedGateway, message: Any, legacy: bool) -> None:
    session = served.legacy_session_id if legacy else served.session_id  # 2025-03-26 allows batches
    status, _, body = served.post(message, session=session)
    assert_clean(status, body)



# ---------------------------------------------------------------- random 2026-07-28 requests

HANDSHAKE_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
STATUS_OF_CODE = {-32700: 400, -32600: 400, -32602: 400, -32020: 400, -32021: 400, -32022: 400, -32601: 404}
"""The revision's HTTP status for each error code of a 2026 JSON reply (PROTOCOL-2026 §A.4); other codes: 200."""


@FUZZ
@given(request=modern_requests())
def test_random_2026_requests_get_clean_answers(served: ServedGateway, request: tuple[Any, dict[str, str]]) -> None:
    message, headers = request
    status, _, body = served.post(message, session=False, **headers)
    assert_clean(status, body)
    version = headers.get("MCP-Protocol-Version")
    if version is not None and version not in HANDSHAKE_VERSIONS and body[:1] == b"{":  # the 2026 way (§A.5)
        reply = orjson.loads(body)
        code = reply["error"]["code"] if "error" in reply else None
        event(f"2026: HTTP {status}, {code or 'a result'}")  # --hypothesis-show-statistics: what was reached
        assert status == STATUS_OF_CODE.get(code, 200), (status, reply)
        if "result" in reply:
            assert reply["result"].get("resultType") in ("complete", "input_required"), reply


def mutate(data: bytes, position: int, mutation: str, payload: bytes) -> bytes:
    at = position % (len(data) + 1)
    return {
        "insert": data[:at] + payload + data[at:],
        "replace": data[:at] + payload + data[at + len(payload):],
        "truncate": data[:at],
        "flip": data[:at] + bytes([data[at] ^ 0x80]) + data[at + 1:] if at < len(data) else data,
    }[mutation]


@FUZZ
@given(position=st.integers(min_value=0, max_value=200),
       mutation=st.sampled_from(["insert", "replace", "truncate", "flip"]),
       payload=st.binary(max_size=12) | st.sampled_from([b"\xff", b"\xc0\x80", b"\\ud800", b"\x00", b"1e400", b"[",
                                                         b"}", b'"', b",", b"null", b"-"]))
def test_mutated_bytes_get_clean_answers(served: ServedGateway, position: int, mutation: str,
                                         payload: bytes) -> None:
    status, _, body = served.post(mutate(orjson.dumps(GOOD_CALL), position, mutation, payload))
    assert_clean(status, body)


# ---------------------------------------------------------------- crafted bodies

DEEP = 100_000
CRAFTED = {
    "100k nested arrays": (b"[" * DEEP + b"]" * DEEP, 400, -32700),
    "100k nested arrays in arguments": (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calc__add","arguments":{"a":'
        + b"[" * DEEP + b"]" * DEEP + b"}}}", 400, -32700),
    "300 nested arrays (parseable, not encodable)": (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calc__add","arguments":{"a":'
        + b"[" * 300 + b"]" * 300 + b"}}}", 400, -32600),
    "300 nested arrays as the tool name": (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":' + b"[" * 300 + b"]" * 300 + b"}}",
        400, -32600),
    "1e400": (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calc__add",'
              b'"arguments":{"a":1e400,"b":1}}}', 400, -32700),
    "a 5000-digit integer": (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":1' + b"0" * 5000 + b"}}",
                             400, -32700),
    "an id of 2**64": (b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}', 400, -32600),
    "an id of -2**63-1": (b'{"jsonrpc":"2.0","id":-9223372036854775809,"method":"ping"}', 400, -32600),
    "an id that is a float": (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', 400, -32600),
    "a 900 KB method name": (b'{"jsonrpc":"2.0","id":1,"method":"' + b"m" * 900_000 + b'"}', 200, -32601),
    "a 900 KB tool name": (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"'
                           + b"n" * 900_000 + b'"}}', 200, -32602),
    "invalid UTF-8": (b'{"jsonrpc":"2.0","id":1,"method":"p\xffing"}', 400, -32700),
    "a lone surrogate escape": (b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}', 400, -32700),
    "a UTF-8 BOM": (b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"ping"}', 400, -32700),
    "NUL bytes in strings": (b'{"jsonrpc":"2.0","id":"\\u0000","method":"ping\\u0000"}', 200, -32601),
    "an empty body": (b"", 400, -32700),
    "null": (b"null", 400, -32600),
    "an empty batch": (b"[]", 400, -32600),
    "a batch on a 2025-11-25 session": (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', 400, -32600),
    "trailing garbage": (b'{"jsonrpc":"2.0","id":1,"method":"ping"} {"x":1}', 400, -32700),
}


@pytest.mark.parametrize("case", CRAFTED)
def test_crafted_bodies_get_the_documented_error(served: ServedGateway, case: str) -> None:
    body, expected_status, expected_code = CRAFTED[case]
    status, _, reply = served.post(body)
    assert_clean(status, reply)
    assert status == expected_status, reply[:300]
    assert orjson.loads(reply)["error"]["code"] == expected_code
    served.healthy()


def test_a_batch_at_the_size_limit_is_answered_item_by_item_and_a_larger_one_refused(served: ServedGateway) -> None:
    limit = 100  # limits.batch_size's default
    batch = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(limit)]
    status, _, body = served.post(batch, session=served.legacy_session_id)
    assert_clean(status, body)
    assert sorted(reply["id"] for reply in orjson.loads(body)) == list(range(limit))
    huge = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(20_000)]
    status, headers, body = served.post(huge, session=served.legacy_session_id)
    assert_clean(status, body)
    assert (status, orjson.loads(body)["error"]["data"], headers["Retry-After"]) == (
        429, {"reason": "limit", "limit": "batch_size"}, "1")
    served.healthy()


# ---------------------------------------------------------------- content types and headers


@pytest.mark.parametrize(("content_type", "accept", "status"), [
    ("text/plain", None, 415),
    ("", None, 415),
    ("multipart/form-data; boundary=x", None, 415),
    ("application/x-www-form-urlencoded", None, 415),
    ("application/json; charset=utf-16", None, 200),  # the body is UTF-8 JSON: parameters do not matter
    ("application/json", "text/html", 406),
    ("application/json", "", 406),
])
def test_wrong_content_types_are_refused_cleanly(served: ServedGateway, content_type: str, accept: str | None,
                                                 status: int) -> None:
    headers = {"Content-Type": content_type, **({"Accept": accept} if accept is not None else {})}
    got, _, body = served.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, **headers)
    assert_clean(got, body)
    assert got == status, body
    served.healthy()


def raw_request(served: ServedGateway, *header_lines: bytes, body: bytes = b"{}") -> bytes:
    head = [b"POST /mcp HTTP/1.1", f"Host: {HOST}:{served.port}".encode(), b"Content-Type: application/json",
            b"Accept: application/json, text/event-stream", f"Authorization: Bearer {API_KEY}".encode(),
            f"Mcp-Session-Id: {served.session_id}".encode(), b"Connection: close", *header_lines,
            f"Content-Length: {len(body)}".encode()]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


INJECTIONS = {
    "CR inside a value": b"X-Request-Id: abc\rX-Injected: 1",
    "LF inside a value": b"X-Request-Id: abc\nX-Injected: 1",
    "NUL inside a value": b"X-Request-Id: abc\x00def",
    "CRLF in the session id": b"Mcp-Session-Id: x\r\n\r\nGET /healthz HTTP/1.1",
    "a space in a header name": b"X Bad: 1",
    "a header without a colon": b"NoColonHere",
    "an obsolete line fold": b"X-Request-Id: abc\r\n  folded",
    "a 100 KB header value": b"X-Big: " + b"v" * 100_000,
    "a 100 KB header name": b"X" * 100_000 + b": 1",
    "2,000 headers": b"\r\n".join(b"X-H%d: %d" % (i, i) for i in range(2000)),
    "a request id that tries to inject": b"X-Request-Id: abc%0d%0aX-Injected:%201",
}


@pytest.mark.parametrize("case", INJECTIONS)
def test_header_injection_and_huge_headers_are_refused_cleanly(served: ServedGateway, case: str) -> None:
    message = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    reply = served.raw(raw_request(served, INJECTIONS[case], body=message))
    head, _, body = reply.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith((b"HTTP/1.1 ", b"HTTP/1.0 ")) else 0  # parser errors: 1.0
    assert 200 <= status < 500, reply[:300]
    assert b"X-Injected" not in head and b"x-injected" not in head.lower()
    assert not any(leak in body for leak in LEAKS), body[:300]
    served.healthy()


# ---------------------------------------------------------------- sizes and slow clients


def test_an_oversize_body_is_413(served: ServedGateway) -> None:
    status, _, body = served.post(b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"' + b"y" * 2_000_000 + b'"}')
    assert_clean(status, body)
    assert status == 413
    served.healthy()


def test_an_oversize_chunked_body_is_413(served: ServedGateway) -> None:
    chunk = b"y" * 65536
    chunks = b"".join(b"%x\r\n" % len(chunk) + chunk + b"\r\n" for _ in range(40)) + b"0\r\n\r\n"
    head = (f"POST /mcp HTTP/1.1\r\nHost: {HOST}:{served.port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nAuthorization: Bearer {API_KEY}\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode()
    reply = served.raw(head + chunks)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    served.healthy()


def test_a_body_shorter_than_its_content_length_then_a_hang_up(served: ServedGateway) -> None:
    request = raw_request(served, body=b'{"jsonrpc":"2.0"')
    request = request.replace(b"Content-Length: 16", b"Content-Length: 5000")
    served.raw(request, read=False)  # we hang up mid-body; the gateway must just drop it
    served.healthy()


def trickle(served: ServedGateway, data: bytes, interval: float) -> bytes:
    with socket.create_connection((HOST, served.port), timeout=30) as sock:
        for byte in data:
            sock.sendall(bytes([byte]))
            time.sleep(interval)
        return read_all(sock)


@pytest.mark.parametrize("part", ["body", "headers"])
def test_a_client_trickling_its_request_does_not_hold_up_others(served: ServedGateway, part: str) -> None:
    message = orjson.dumps({"jsonrpc": "2.0", "id": "slow", "method": "ping"})
    request = raw_request(served, body=message)
    split = request.index(b"\r\n\r\n") + 4 if part == "body" else 30
    replies: list[bytes] = []

    def slow_client() -> None:
        with socket.create_connection((HOST, served.port), timeout=30) as sock:
            sock.sendall(request[:split])
            for byte in request[split:split + 60]:  # ~3 s of trickling
                sock.sendall(bytes([byte]))
                time.sleep(0.05)
            sock.sendall(request[split + 60:])
            replies.append(read_all(sock))

    slow = threading.Thread(target=slow_client)
    slow.start()
    time.sleep(0.3)
    started = time.monotonic()
    served.healthy()  # others are served meanwhile
    assert time.monotonic() - started < 2.0
    slow.join(30)
    assert replies and replies[0].startswith(b"HTTP/1.1 200"), replies
    assert b'"id":"slow"' in replies[0]
