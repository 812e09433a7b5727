"""`mcp-gateway audit verify`: prove a trail unbroken, or name the first record changed, removed or reordered.

Records are read in the order they were stored (a file's lines; a stream's entries) and followed per
chain (chain.py): each must carry a MAC that matches its content (else it was changed), the seq after
the one before in its chain (else one was removed, or they were reordered), and in `prev` the MAC of
that record. A chain whose first record here is not its seq 0 continues from records this reading
does not hold (an older, rotated file; a stream trimmed by MAXLEN): that is noted, not failed.
A removed last record leaves no trace in a chain; a chain's next one (the next start) shows the gap.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from gateway.audit.chain import CHAIN, MAC, PREV, SEQ, mac_of
from gateway.audit.record import VERSION


@dataclass(frozen=True, slots=True)
class Problem:
    where: str  # FILE:LINE, or a stream entry's id
    what: str
    record: dict[str, Any] | None = None  # as read (None: not a record)

    def describe(self) -> str:
        rec = self.record or {}
        names = ", ".join(f"{key} {rec[key]}" for key in (CHAIN, SEQ, "request_id", "time") if rec.get(key) is not None)
        return f"{self.where}{f' ({names})' if names else ''}: {self.what}"


@dataclass(slots=True)
class Report:
    records: int = 0
    chains: dict[str, tuple[int, str]] = field(default_factory=dict)  # chain -> (last seq, last MAC)
    notes: list[str] = field(default_factory=list)
    problem: Problem | None = None


def verify(lines: Iterable[tuple[str, bytes]], key: bytes | None) -> Report:
    """Follow every chain through `lines` ((where, line) in stored order); stop at the first problem."""
    report = Report()
    for where, line in lines:
        if not line.strip():
            continue
        report.problem = _check(where, line, key, report)
        if report.problem is not None:
            break
        report.records += 1
    return report


def _check(where: str, line: bytes, key: bytes | None, report: Report) -> Problem | None:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return Problem(where, "not JSON: the record was changed")
    if not isinstance(record, dict) or not isinstance(record.get(CHAIN), str) or type(record.get(SEQ)) is not int:
        return Problem(where, "not an audit record (no chain and seq): it was changed", None)
    if type(record.get("v")) is int and record["v"] > VERSION:
        return Problem(where, f"written in format {record['v']}, newer than this reader's {VERSION}", record)
    if key is not None and not _mac_matches(key, record):
        return Problem(where, "its MAC does not match its content: the record was changed", record)
    return _follows(where, record, key, report)


def _mac_matches(key: bytes, record: dict[str, Any]) -> bool:
    given = record.get(MAC)
    return isinstance(given, str) and hmac.compare_digest(given, mac_of(key, record))


def _follows(where: str, record: dict[str, Any], key: bytes | None, report: Report) -> Problem | None:
    """The record's place in its chain: the seq after the last one seen, and `prev` naming that one's MAC."""
    chain, seq = record[CHAIN], record[SEQ]
    last = report.chains.get(chain)
    if last is None:
        if seq != 0:
            report.notes.append(f"chain {chain} starts at seq {seq} here: earlier records are in an older file "
                                "or were trimmed from the stream")
    elif seq <= last[0]:
        return Problem(where, f"seq {seq} comes after seq {last[0]} of its chain: records were reordered or "
                              "repeated", record)
    elif seq != last[0] + 1:
        missing = f"seq {last[0] + 1}" if seq == last[0] + 2 else f"seqs {last[0] + 1}..{seq - 1}"
        return Problem(where, f"{missing} of its chain should come before it: removed (or moved)", record)
    elif key is not None and record.get(PREV) != last[1]:
        return Problem(where, "its prev is not the MAC of the record before it: that record was replaced", record)
    report.chains[chain] = (seq, str(record.get(MAC, "")))
    return None


def file_lines(paths: Iterable[str]) -> Iterator[tuple[str, bytes]]:
    """Each line of each file, in order, with FILE:LINE (files are read whole: rotation keeps them bounded)."""
    for path in paths:
        for number, line in enumerate(Path(path).read_bytes().split(b"\n"), start=1):
            yield f"{path}:{number}", line
