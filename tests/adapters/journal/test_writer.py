"""The journal writer: round trips, reopening, rollover, torn tails, crashes and full disks."""
from __future__ import annotations

import asyncio
import errno
import gzip
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from adapters.journal.writer import Journal, JournalCorruption, JournalError, JournalWriteError
from adapters.journal.format import iter_records, list_segments, read_journal, segment_name

ROOT = Path(__file__).resolve().parents[3]
PAD = "x" * 900  # bodies of about 1 KB, the size of a typical event


def body(i: int) -> dict:
    return {"kind": "IsrChanged", "i": i, "pad": PAD}


def seqs(directory) -> list[int]:
    return [r["seq"] for r in read_journal(directory)]


class Snapshots:
    """A snapshot provider that records what it was asked for."""

    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return 7, {"snapshot": self.calls}


# --------------------------------------------------------------------------- basics


async def test_round_trip(tmp_path):
    j = Journal.open(tmp_path, 1)
    bodies = [{"i": 1}, {"nested": {"a": [1, 2.5, None, True, "\u00e9\u2603"]}}, {}, {"big": "y" * 2_000_000}]
    written = [j.append("event", b, controller_epoch=4, at=1000 + n, v=2) for n, b in enumerate(bodies)]
    await j.sync()
    assert written == [1, 2, 3, 4] and j.durable_seq == 4
    j.close()
    records = list(read_journal(tmp_path))
    assert [r["body"] for r in records] == bodies
    assert records[0] == {"seq": 1, "controller_id": 1, "controller_epoch": 4, "at": 1000, "type": "event", "v": 2, "body": {"i": 1}}
    assert all(p.name == segment_name(1) or p.name.startswith(".") for p in tmp_path.iterdir())


def test_non_json_body_consumes_no_seq(tmp_path):
    with Journal.open(tmp_path, 1) as j:
        j.append("event", {"a": 1}, controller_epoch=1, at=0)
        with pytest.raises(TypeError):
            j.append("event", {"a": object()}, controller_epoch=1, at=0)
        with pytest.raises(ValueError):
            j.append("event", {"a": float("nan")}, controller_epoch=1, at=0)
        assert j.append("event", {"a": 2}, controller_epoch=1, at=0) == 2
    assert seqs(tmp_path) == [1, 2]


def test_seq_continues_across_reopen(tmp_path):
    snaps = Snapshots()
    for round_ in range(3):
        with Journal.open(tmp_path, 1, snapshot_provider=snaps) as j:
            assert j.last_seq == (0 if round_ == 0 else 1 + 5 * round_)
            for i in range(5):
                j.append("event", body(i), controller_epoch=round_ + 1, at=i)
            j.sync_blocking()
    records = list(read_journal(tmp_path))
    assert [r["seq"] for r in records] == list(range(1, 17))
    # one segment, one head: continuing a segment after reopen needs no new snapshot
    assert [r["type"] for r in records].count("snapshot") == 1 and snaps.calls == 1
    assert [r["controller_epoch"] for r in records[1:]] == [1] * 5 + [2] * 5 + [3] * 5


def test_second_writer_and_foreign_journal_are_refused(tmp_path):
    with Journal.open(tmp_path, 1) as j:
        j.append("event", {}, controller_epoch=1, at=0)
        with pytest.raises(JournalError, match="already open"):
            Journal.open(tmp_path, 1)
    with pytest.raises(JournalError, match="belongs to controller 1, not 2"):
        Journal.open(tmp_path, 2)
    Journal.open(tmp_path, 1).close()  # the refused opens released everything


def test_stats(tmp_path):
    with Journal.open(tmp_path, 1, fsync="always") as j:
        assert j.stats().last_seq == 0 and j.stats().segment is None
        for i in range(3):
            j.append("event", body(i), controller_epoch=1, at=i)
            j.sync_blocking()
        s = j.stats()
    assert (s.records, s.last_seq, s.durable_seq, s.fsyncs, s.segments_rolled) == (3, 3, 3, 3, 1)
    assert s.bytes == sum(p.stat().st_size for p in tmp_path.glob("segment-*"))
    assert s.last_fsync_ms is not None and s.last_fsync_ms >= 0 and s.segment == segment_name(1)


# --------------------------------------------------------------------------- fsync policies


async def test_batch_group_commit_shares_fsyncs(tmp_path):
    j = Journal.open(tmp_path, 1, fsync="batch")

    async def producer(k):
        for i in range(20):
            seq = j.append("event", {"k": k, "i": i}, controller_epoch=1, at=i)
            await j.sync()
            assert j.durable_seq >= seq

    await asyncio.gather(*(producer(k) for k in range(50)))
    stats = j.stats()
    j.close()
    assert stats.durable_seq == 1000 and seqs(tmp_path) == list(range(1, 1001))
    assert stats.fsyncs < 200, stats  # 1000 sync() calls shared far fewer fsyncs


async def test_sync_returns_only_when_earlier_appends_are_durable(tmp_path, monkeypatch):
    j = Journal.open(tmp_path, 1, fsync="batch")
    real_fsync = os.fsync

    def slow_fsync(fd):
        time.sleep(0.05)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    done = []

    async def one(i):
        seq = j.append("event", {"i": i}, controller_epoch=1, at=i)
        await j.sync()
        assert j.durable_seq >= seq
        done.append(seq)

    first = asyncio.create_task(one(1))
    await asyncio.sleep(0.01)  # the first fsync is now running and covers seq 1 only
    await asyncio.gather(one(2), one(3), first)
    j.close()
    assert sorted(done) == [1, 2, 3]
    assert j.stats().fsyncs == 2  # one for seq 1, one shared by seqs 2 and 3


def test_always_fsyncs_each_sync_and_never_does_not(tmp_path):
    with Journal.open(tmp_path / "a", 1, fsync="always") as j:
        for i in range(10):
            j.append("event", {"i": i}, controller_epoch=1, at=i)
            j.sync_blocking()
        j.sync_blocking()  # nothing new: nothing to fsync
        assert j.stats().fsyncs == 10
    with Journal.open(tmp_path / "n", 1, fsync="never") as j:
        for i in range(10):
            j.append("event", {"i": i}, controller_epoch=1, at=i)
            j.sync_blocking()
        assert j.stats().fsyncs == 0 and j.durable_seq == 0
        assert len(list(iter_records(tmp_path / "n" / segment_name(1)))) == 10  # handed to the OS
    assert seqs(tmp_path / "n") == list(range(1, 11))


# --------------------------------------------------------------------------- rollover


@pytest.mark.parametrize("compress", [True, False])
def test_rollover_with_snapshot_heads(tmp_path, compress):
    snaps = Snapshots()
    with Journal.open(tmp_path, 1, segment_bytes=10_000, compress_closed=compress, snapshot_provider=snaps) as j:
        for i in range(100):
            j.append("event", body(i), controller_epoch=7, at=i)
            j.sync_blocking()
    segments = list_segments(tmp_path)
    assert len(segments) >= 8 and snaps.calls == len(segments)
    assert [s.compressed for s in segments] == [compress] * (len(segments) - 1) + [False]
    files = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert files == sorted(s.path.name for s in segments)  # no leftovers of the compression
    total = 0
    for seg in segments:  # each segment replays on its own, from its own head
        records = list(iter_records(seg.path))
        assert records[0]["type"] == "snapshot" and records[0]["seq"] == seg.first_seq
        assert records[0]["body"] == {"snapshot": segments.index(seg) + 1}
        assert all(r["type"] == "event" for r in records[1:])
        total += len(records) - 1
        if seg.compressed:
            with gzip.open(seg.path, "rt") as f:  # an ordinary gzip stream of the same lines
                assert f.readline().startswith('{"crc":"')
    assert total == 100
    assert [r["body"]["i"] for r in read_journal(tmp_path) if r["type"] == "event"] == list(range(100))


def test_snapshot_taken_when_the_next_segment_starts(tmp_path):
    """The head is produced by the append after the size limit, so it reflects every record
    before it (the loop has applied them), not a state one event behind."""
    state = {"applied": 0}
    with Journal.open(tmp_path, 1, segment_bytes=3000, snapshot_provider=lambda: (1, dict(state))) as j:
        for i in range(10):
            j.append("event", body(i), controller_epoch=1, at=i)
            state["applied"] = i + 1  # step() runs after the append
    records = list(read_journal(tmp_path))
    heads = [r["body"]["applied"] for r in records if r["type"] == "snapshot"]
    assert len(heads) >= 3 and heads[0] == 0 and heads[-1] > 0, heads  # the loop below checks each
    applied = 0
    for r in records:
        if r["type"] == "snapshot":
            assert r["body"]["applied"] == applied
        else:
            applied += 1


def test_roll_on_request_and_empty_segment_reuse(tmp_path):
    with Journal.open(tmp_path, 1, snapshot_provider=lambda: (1, {})) as j:
        j.append("event", {}, controller_epoch=1, at=0)
        j.roll()
        j.append("event", {}, controller_epoch=2, at=0)
    assert [s.first_seq for s in list_segments(tmp_path)] == [1, 3]
    assert [r["type"] for r in read_journal(tmp_path)] == ["snapshot", "event", "snapshot", "event"]


def test_crash_during_compression_keeps_the_plain_segment(tmp_path):
    with Journal.open(tmp_path, 1, segment_bytes=5000, compress_closed=False, snapshot_provider=lambda: (1, {})) as j:
        for i in range(20):
            j.append("event", body(i), controller_epoch=1, at=i)
    first = list_segments(tmp_path)[0].path
    expected = seqs(tmp_path)
    # states a crash can leave: a temp file, and a .gz renamed into place before the unlink
    (tmp_path / ("." + first.name + ".gz.tmp")).write_bytes(b"partial")
    (tmp_path / (first.name + ".gz")).write_bytes(gzip.compress(first.read_bytes())[:50])
    with Journal.open(tmp_path, 1, compress_closed=True) as j:
        assert any("interrupted compression" in n for n in j.recovery_notes)
        assert any("was not yet replaced" in n for n in j.recovery_notes)
    names = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert all(n.endswith(".gz") for n in names[:-1]) and names[-1].endswith(".jsonl")
    assert seqs(tmp_path) == expected


# --------------------------------------------------------------------------- damage


def test_torn_tail_is_truncated_on_open(tmp_path):
    with Journal.open(tmp_path, 1) as j:
        for i in range(5):
            j.append("event", body(i), controller_epoch=1, at=i)
    path = tmp_path / segment_name(1)
    good_size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b'{"crc":"0123abcd","seq":6,"contr')
    j = Journal.open(tmp_path, 1)
    assert path.stat().st_size == good_size
    assert len(j.recovery_notes) == 1 and "line 6" in j.recovery_notes[0] and "no trailing newline" in j.recovery_notes[0]
    assert j.append("event", body(5), controller_epoch=1, at=5) == 6
    j.close()
    assert seqs(tmp_path) == [1, 2, 3, 4, 5, 6]


def test_a_flipped_bit_in_the_last_complete_line_is_corruption_not_a_torn_tail(tmp_path):
    with Journal.open(tmp_path, 1) as j:
        for i in range(3):
            j.append("event", body(i), controller_epoch=1, at=i)
    path = tmp_path / segment_name(1)
    data = bytearray(path.read_bytes())
    data[-20] ^= 0x01  # damage inside the last record, which may have been fsynced
    path.write_bytes(bytes(data))
    with pytest.raises(JournalCorruption, match=r"segment-0+1\.jsonl:3: checksum mismatch"):
        Journal.open(tmp_path, 1)
    assert path.read_bytes() == bytes(data)  # nothing truncated


def test_a_last_line_with_nul_bytes_is_an_unfinished_write_and_truncated(tmp_path):
    with Journal.open(tmp_path, 1) as j:
        for i in range(3):
            j.append("event", body(i), controller_epoch=1, at=i)
    path = tmp_path / segment_name(1)
    data = bytearray(path.read_bytes())
    end = len(data) - 1
    data[end - 30:end] = b"\0" * 30  # a crash left allocated but unwritten space
    path.write_bytes(bytes(data))
    with Journal.open(tmp_path, 1) as j:
        assert "checksum mismatch" in j.recovery_notes[0] and "NUL" in j.recovery_notes[0]
        assert j.last_seq == 2


def test_torn_first_record_leaves_an_empty_segment_that_gets_its_head(tmp_path):
    (tmp_path / segment_name(1)).write_bytes(b'{"crc":"12')
    with Journal.open(tmp_path, 1, snapshot_provider=lambda: (1, {"s": 1})) as j:
        assert j.last_seq == 0
        assert j.append("event", {}, controller_epoch=1, at=0) == 2
    assert [r["type"] for r in read_journal(tmp_path)] == ["snapshot", "event"]


def test_flipped_byte_in_the_middle_names_file_and_line(tmp_path):
    with Journal.open(tmp_path, 1) as j:
        for i in range(10):
            j.append("event", body(i), controller_epoch=1, at=i)
    path = tmp_path / segment_name(1)
    lines = path.read_bytes().split(b"\n")
    data = bytearray(path.read_bytes())
    data[sum(len(l) + 1 for l in lines[:3]) + 100] ^= 0x20  # inside line 4
    path.write_bytes(bytes(data))
    with pytest.raises(JournalCorruption) as info:
        Journal.open(tmp_path, 1)
    assert info.value.path == str(path) and info.value.line == 4
    assert f"{path}:4: checksum mismatch" in str(info.value)
    with pytest.raises(JournalCorruption, match=":4: "):
        list(read_journal(tmp_path))
    assert path.read_bytes() == bytes(data)  # nothing was truncated
    Journal.open(tmp_path / "other", 1).close()  # and the lock was released: other dirs still open


# --------------------------------------------------------------------------- crashes


CHILD_APPENDER = textwrap.dedent(
    """
    import asyncio, sys
    from adapters.journal.writer import Journal

    directory, policy = sys.argv[1], sys.argv[2]
    pad = "x" * 900

    async def main():
        j = Journal.open(directory, 1, fsync=policy, segment_bytes=64 * 1024,
                         snapshot_provider=lambda: (1, {"snapshot": "s" * 500}))
        out = sys.stdout

        async def producer(k):
            while True:
                seq = j.append("event", {"k": k, "pad": pad}, controller_epoch=1, at=0)
                await j.sync()
                out.write(f"{seq}\\n")
                out.flush()

        await asyncio.gather(*(producer(k) for k in range(4)))

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("policy", ["always", "batch"])
def test_kill_9_loses_no_synced_record(tmp_path, policy):
    printed: set[int] = set()
    for round_ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD_APPENDER, str(tmp_path), policy],
            stdout=subprocess.PIPE, cwd=ROOT, text=True,
        )
        start = time.monotonic()
        count = 0
        for line in child.stdout:
            printed.add(int(line))
            count += 1
            if count >= 1500 or time.monotonic() - start > 10:
                break
        os.kill(child.pid, signal.SIGKILL)
        printed.update(int(line) for line in child.stdout)  # what it printed before dying
        child.wait()
        assert child.returncode == -signal.SIGKILL
        assert count >= 1500, "the child appended too little before the kill"

        j = Journal.open(tmp_path, 1)  # verifies and repairs the tail
        last = j.last_seq
        j.close()
        present = seqs(tmp_path)
        assert present == list(range(1, last + 1))  # gap-free across segments and reopenings
        assert printed <= set(present), sorted(printed - set(present))[:10]
    assert len(list_segments(tmp_path)) > 10  # the kills landed among rollovers


# --------------------------------------------------------------------------- full disks


def _fill_until_failure(j: Journal, size: int = 1000) -> tuple[list[int], JournalWriteError]:
    synced = []
    for i in range(100_000):
        try:
            seq = j.append("event", {"i": i, "pad": "z" * size}, controller_epoch=1, at=i)
            j.sync_blocking()
        except JournalWriteError as exc:
            return synced, exc
        synced.append(seq)
    raise AssertionError("the disk never filled")


def test_enospc_on_write_refuses_further_appends(tmp_path, monkeypatch):
    j = Journal.open(tmp_path, 1, fsync="always")
    for i in range(5):
        j.append("event", body(i), controller_epoch=1, at=i)
    j.sync_blocking()
    real_write = os.write

    def full_disk(fd, data):
        real_write(fd, bytes(data[:100]))  # a partial write, then the disk is full
        monkeypatch.setattr(os, "write", raising_write)
        return 100

    def raising_write(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    j.append("event", body(5), controller_epoch=1, at=5)
    with pytest.raises(JournalWriteError) as info:
        j.sync_blocking()
    err = info.value
    assert err.errno == errno.ENOSPC and err.path == str(tmp_path / segment_name(1))
    assert "no space left on device" in str(err) and str(tmp_path / segment_name(1)) in str(err)
    monkeypatch.setattr(os, "write", real_write)
    with pytest.raises(JournalWriteError, match="refuses appends"):
        j.append("event", body(6), controller_epoch=1, at=6)
    with pytest.raises(JournalWriteError):
        j.sync_blocking()
    j.close()
    assert (tmp_path / segment_name(1)).read_bytes().endswith(b"\n")  # the partial line was cut off
    with Journal.open(tmp_path, 1) as j:
        assert j.recovery_notes == [] and j.last_seq == 5
    assert seqs(tmp_path) == [1, 2, 3, 4, 5]


async def test_enospc_on_fsync_fails_every_waiter(tmp_path, monkeypatch):
    j = Journal.open(tmp_path, 1, fsync="batch")
    j.append("event", {}, controller_epoch=1, at=0)
    await j.sync()

    def failing_fsync(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)

    async def one(i):
        j.append("event", {"i": i}, controller_epoch=1, at=i)
        await j.sync()

    results = await asyncio.gather(*(one(i) for i in range(5)), return_exceptions=True)
    assert all(isinstance(r, JournalWriteError) for r in results) and "fsync failed" in str(results[0])
    with pytest.raises(JournalWriteError):
        j.append("event", {}, controller_epoch=1, at=0)
    monkeypatch.undo()
    j.close()  # the failure was already reported: close does not raise it again
    assert j.durable_seq == 1
    assert seqs(tmp_path)[:1] == [1] and seqs(tmp_path) == list(range(1, len(seqs(tmp_path)) + 1))


CHILD_FSIZE = textwrap.dedent(
    """
    import resource, signal, sys
    from adapters.journal.writer import Journal, JournalWriteError

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
    j = Journal.open(sys.argv[1], 1, fsync="always", compress_closed=False)
    try:
        while True:
            seq = j.append("event", {"pad": "p" * 1500}, controller_epoch=1, at=0)
            j.sync_blocking()
            print(seq, flush=True)
    except JournalWriteError as exc:
        print("ERROR", exc, flush=True)
    try:
        j.append("event", {}, controller_epoch=1, at=0)
    except JournalWriteError:
        print("REFUSED", flush=True)
    sys.exit(3)
    """
)


def test_file_size_limit_in_a_subprocess(tmp_path):
    out = subprocess.run([sys.executable, "-c", CHILD_FSIZE, str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 3, out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1] == "REFUSED"
    assert lines[-2].startswith("ERROR") and "file size limit exceeded" in lines[-2]
    assert str(tmp_path / segment_name(1)) in lines[-2]
    synced = [int(l) for l in lines[:-2]]
    assert len(synced) > 50
    assert seqs(tmp_path) == synced  # every synced record, and nothing torn or out of order


@pytest.fixture
def tiny_tmpfs(tmp_path):
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False, timeout=30)


def test_real_full_tmpfs(tiny_tmpfs):
    directory = tiny_tmpfs / "journal"
    j = Journal.open(directory, 1, fsync="always", compress_closed=False)
    synced, err = _fill_until_failure(j)
    assert err.errno == errno.ENOSPC and str(directory / segment_name(1)) in str(err)
    with pytest.raises(JournalWriteError):
        j.append("event", {}, controller_epoch=1, at=0)
    j.close()
    assert len(synced) > 20
    with Journal.open(directory, 1) as again:
        assert again.last_seq == synced[-1]
    assert seqs(directory) == synced


def test_a_body_vouched_float_free_is_encoded_to_the_same_bytes_without_the_walk():
    """`floats=False` (the codec's bodies: controller_core.codec.FLOAT_FREE) skips the walk that
    tells a NaN from a None; for a body that holds no float the bytes are the same."""
    from adapters.journal.writer import encode_record
    from controller_core import codec
    from controller_core import events as E
    from tests.core.builders import snapshot

    assert codec.FLOAT_FREE
    topics = {f"t{i}": [[1, 2, 3], [2, 3, 1]] for i in range(50)}
    body = codec.encode_event(E.ControllerElected(at=1, epoch=2, epoch_zk_version=1,
                                                  snapshot=snapshot(brokers=(1, 2, 3), topics=topics)))
    assert encode_record(1, 1, 2, 1, "event", 1, body, floats=False) == encode_record(1, 1, 2, 1, "event", 1, body)
    # and without the vouch a NaN is still refused
    with pytest.raises(ValueError):
        encode_record(1, 1, 2, 1, "event", 1, {"a": float("nan"), "b": None})
