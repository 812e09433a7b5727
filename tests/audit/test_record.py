"""What a record holds, as plain input -> output: canonical order, the digest, redaction, no token."""

from __future__ import annotations

import hashlib
import json
import time
from types import SimpleNamespace

import orjson

from gateway.audit.chain import Chain, mac_of
from gateway.audit.record import REDACTED, Entry, RecordMaker, canonical, timestamp

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"


def handed(arguments: dict[str, object], **ctx: object) -> Entry:
    context = SimpleNamespace(principal=SimpleNamespace(tenant="acme", subject="alice"), request_id="r1",
                              traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01", envelope=None, client=None,
                              protocol_version="2025-11-25", target="add", backend="calc", outcome="ok", extra={},
                              size=0)
    context.__dict__.update(ctx)
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "calc__add", "arguments": arguments, "token": JWT}}
    c = context
    return Entry(*(time.time(), 0.002, "tools/call", request, {"jsonrpc": "2.0", "id": 1, "result": {}}, c.principal,
                  c.request_id, c.traceparent, c.client, c.envelope, c.protocol_version, c.target, c.backend,
                  c.outcome, c.extra, c.size))


def test_a_record_is_in_canonical_order_so_its_mac_holds_without_a_sort() -> None:
    chain = Chain(b"k" * 32)
    maker = RecordMaker(arguments="digest", redact_keys=(), redact_pointers=(), chain=chain)
    lines = [maker.line(handed({"b": 1, "a": [2]}, extra={"rule": "r1", "denied": "rule"},
                               envelope=SimpleNamespace(client_info={"version": "2", "name": "cli"}))),
             maker.line(handed({}, client={"name": "session-client", "version": "1"}))]
    first, second = (orjson.loads(line) for line in lines)
    for parsed in (first, second):
        assert orjson.dumps({k: v for k, v in parsed.items() if k != "mac"}) == canonical(
            {k: v for k, v in parsed.items() if k != "mac"})
        assert mac_of(b"k" * 32, parsed) == parsed["mac"]
    assert (first["seq"], second["seq"], second["prev"]) == (0, 1, first["mac"])
    assert first["arguments_sha256"] == hashlib.sha256(b'{"a":[2],"b":1}').hexdigest()
    assert (first["trace_id"], first["client"], first["era"]) == ("a" * 32, {"name": "cli", "version": "2"},
                                                                  "stateless")
    assert first["policy"] == {"denied": "rule", "rule": "r1"} and "arguments" not in first
    assert (second["client"], second["era"], second["policy"]) == (
        {"name": "session-client", "version": "1"}, "session", None)  # a session's, as initialize named it
    assert JWT not in b"".join(lines).decode()  # params.token is never read


def test_redacted_arguments_mask_secret_keys_pointers_and_token_values() -> None:
    maker = RecordMaker(arguments="redacted", redact_keys=("*token*", "password"), redact_pointers=("/card/number",),
                        chain=Chain(None))
    arguments = {"query": "q", "API_Token": "x", "nested": [{"Password": "p", "note": f"Bearer {JWT}"}],
                 "card": {"number": "4111", "holder": "A"}}
    line = maker.line(handed(arguments))
    assert json.loads(line)["arguments"] == {"query": "q", "API_Token": REDACTED,
                                             "nested": [{"Password": REDACTED, "note": REDACTED}],
                                             "card": {"number": REDACTED, "holder": "A"}}
    assert arguments["card"]["number"] == "4111"  # the call's own arguments are untouched
    assert b"4111" not in line and JWT.encode() not in line
    assert json.loads(line)["arguments_sha256"] == hashlib.sha256(canonical(arguments)).hexdigest()


def test_the_time_is_rfc3339_to_the_millisecond() -> None:
    assert timestamp(0.0) == "1970-01-01T00:00:00.000Z"
    assert timestamp(1_800_000_000.9995) == "2027-01-15T08:00:00.999Z"
