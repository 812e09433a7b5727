"""The SSE decoder and encoder (`gateway.protocol.sse`), which the HTTP upstream reads with."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from gateway.protocol.sse import SseDecoder, SseEvent, encode_event, encode_retry


def decode(*chunks: bytes) -> list[SseEvent]:
    decoder = SseDecoder()
    return [event for chunk in chunks for event in decoder.feed(chunk)]


def test_an_event_is_dispatched_by_the_empty_line() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"id: 1\nevent: message\ndata: {}\n") == []
    assert decoder.feed(b"\n") == [SseEvent(data="{}", event="message", id="1")]


def test_data_lines_join_with_newlines_and_comments_are_skipped() -> None:
    assert decode(b": keep-alive\n\ndata: a\ndata:b\ndata\n\n") == [SseEvent("a\nb\n")]


def test_all_three_line_endings_work_even_split_across_chunks() -> None:
    assert decode(b"data: x\r", b"\n\r", b"\ndata: y\r\r") == [SseEvent("x"), SseEvent("y")]
    assert decode(b"data: a\r", b"\n", b"\n") == [SseEvent("a")]


def test_a_lone_cr_ends_the_event_without_waiting_for_more_bytes() -> None:
    assert decode(b"data: z\r\r") == [SseEvent("z")]


def test_a_large_event_fed_in_small_chunks_arrives_whole() -> None:
    body = b"data: " + b"q" * 2_000_000 + b"\n\n"
    chunks = [body[i : i + 4096] for i in range(0, len(body), 4096)]
    assert decode(*chunks) == [SseEvent("q" * 2_000_000)]


def test_a_block_without_data_only_updates_id_and_retry() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"id: prime\nretry: 250\n\n") == []
    assert (decoder.last_event_id, decoder.retry) == ("prime", 250)
    assert decoder.feed(b"data: {}\n\n") == [SseEvent("{}", id="prime")]


def test_an_empty_data_field_is_an_event_with_empty_data() -> None:
    assert decode(b"id: 7\ndata:\n\n") == [SseEvent("", id="7")]


def test_a_bad_retry_is_ignored_and_a_custom_event_type_is_kept() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"retry: soon\nevent: ping\ndata: 1\n\n") == [SseEvent("1", event="ping")]
    assert decoder.retry is None


def test_reconnected_drops_the_partial_event_but_keeps_the_last_id() -> None:
    decoder = SseDecoder()
    decoder.feed(b"id: 3\ndata: {}\n\ndata: half")
    decoder.reconnected()
    assert decoder.feed(b"data: whole\n\n") == [SseEvent("whole", id="3")]


def test_the_encoder_writes_id_event_and_one_data_line_per_line() -> None:
    assert encode_event(b"a\nb", event_id="9", event="message") == (b"id: 9\nevent: message\ndata: a\ndata: b\n\n")
    assert encode_retry(1000, event_id="p") == b"id: p\nretry: 1000\n\n"


@given(
    payloads=st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"])), max_size=5),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=20),
)
def test_encoded_events_decode_to_the_same_data_however_the_bytes_are_cut(payloads: list[str], cuts: list[int]) -> None:
    stream = b"".join(encode_event(p.encode(), event_id=str(i)) for i, p in enumerate(payloads))
    points = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    chunks = [stream[a:b] for a, b in itertools.pairwise(points)]
    expected = [p.replace("\r\n", "\n").replace("\r", "\n") for p in payloads]
    assert [event.data for event in decode(*chunks)] == expected


def test_the_last_event_id_advances_only_when_its_event_completes() -> None:
    """Issue 16 item 9: a stream cut inside an event resumes from the event before it, not after it."""
    decoder = SseDecoder()
    assert decoder.feed(b"id: e1\ndata: first\n\n") == [SseEvent("first", id="e1")]
    assert decoder.feed(b"id: e2\ndata: {\"half\":") == []
    assert decoder.last_event_id == "e1"  # e2 never completed: resuming must ask for it again
    decoder.reconnected()
    assert decoder.last_event_id == "e1"
    assert decoder.feed(b"id: e2\ndata: whole\n\n") == [SseEvent("whole", id="e2")]
    assert decoder.last_event_id == "e2"


def test_an_id_without_data_still_counts_once_its_block_ends() -> None:
    """Issue 16 item 9: MCP's priming event (an id, empty data) moves the id at its blank line."""
    decoder = SseDecoder()
    decoder.feed(b"id: p1\n")
    assert decoder.last_event_id is None
    decoder.feed(b"\n")
    assert decoder.last_event_id == "p1"


def test_a_leading_byte_order_mark_is_ignored_even_split() -> None:
    """Issue 16 item 9: a UTF-8 BOM before the first field must not hide the first event."""
    assert decode(b"\xef\xbb\xbfid: 1\ndata: a\n\n") == [SseEvent("a", id="1")]
    assert decode(b"\xef", b"\xbb", b"\xbfdata: b\n\n") == [SseEvent("b")]
    assert decode(b"data: c\n\n\xef\xbb\xbfdata: d\n\n")[0] == SseEvent("c")  # only at the very start
