"""The file sink rotates by size and by age, keeps `file_keep` old files, and a chain verifies across them."""

from __future__ import annotations

from pathlib import Path

from gateway.audit.chain import Chain
from gateway.audit.record import admin_record
from gateway.audit.sinks import FOLLOW_SECONDS, FileSink
from gateway.audit.verify import file_lines, verify

KEY = b"k" * 32


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def names_and_sizes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in folder.iterdir()}


def contents(paths: list[str]) -> bytes:
    return b"".join(Path(p).read_bytes() for p in paths)


def lines(chain: Chain, count: int) -> list[bytes]:
    return [chain.seal(admin_record(1.0, "admin/reload", tenant="ops", subject=f"s{n}", request_id=None,
                                    outcome="applied")) for n in range(count)]


async def test_size_rotation_keeps_the_newest_files_and_the_chain_verifies_across_them(tmp_path: Path) -> None:
    path, chain = tmp_path / "audit.jsonl", Chain(KEY)
    sink = FileSink(str(path), max_bytes=4096, rotate_seconds=0, keep=2)
    written = lines(chain, 60)
    for line in written:
        await sink.write([line])
    await sink.close()
    files = names_and_sizes(tmp_path)
    assert sorted(files) == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    assert max(files.values()) <= 4096
    kept = [str(tmp_path / name) for name in ("audit.jsonl.2", "audit.jsonl.1", "audit.jsonl")]
    report = verify(file_lines(kept), KEY)
    assert report.problem is None
    assert report.notes and "starts at seq" in report.notes[0]  # older files were rotated away
    assert b"".join(line + b"\n" for line in written).endswith(contents(kept))  # a line is written with its newline


async def test_age_rotation_starts_a_new_file(tmp_path: Path) -> None:
    path, clock, chain = tmp_path / "audit.jsonl", Clock(), Chain(KEY)
    sink = FileSink(str(path), max_bytes=1 << 20, rotate_seconds=60, keep=3, clock=clock)
    await sink.write(lines(chain, 2))
    clock.now += 61
    await sink.write(lines(chain, 1))
    await sink.close()
    assert len((tmp_path / "audit.jsonl.1").read_bytes().splitlines()) == 2
    assert len(path.read_bytes().splitlines()) == 1
    assert verify(file_lines([str(tmp_path / "audit.jsonl.1"), str(path)]), KEY).problem is None


async def test_another_process_rotating_the_file_is_followed(tmp_path: Path) -> None:
    path, clock, chain = tmp_path / "audit.jsonl", Clock(), Chain(KEY)
    sink = FileSink(str(path), max_bytes=1 << 20, rotate_seconds=0, keep=3, clock=clock)
    await sink.write(lines(chain, 1))
    path.rename(tmp_path / "audit.jsonl.1")  # as a sibling worker's rotation would
    clock.now += FOLLOW_SECONDS  # it looks once a second
    await sink.write(lines(chain, 1))
    await sink.close()
    assert len(path.read_bytes().splitlines()) == 1
