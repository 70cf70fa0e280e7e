"""The pure-Python journal reader: the checksum rule, segment order, gaps, discovery."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from adapters.journal.writer import encode_record
from adapters.journal.format import (
    InvalidRecord,
    JournalCorruption,
    JournalGap,
    find_journals,
    iter_records,
    list_segments,
    read_journal,
    scan_segment,
    segment_name,
    verify_line,
)

# A line written by the first version of the writer. It must stay readable forever.
GOLDEN = (
    '{"crc":"d4a7ffb9","seq":1,"controller_id":1,"controller_epoch":3,"at":1700000000000,'
    '"type":"event","v":1,"body":{"kind":"BrokersChanged","brokers":[1,2,3]}}'
)


def rec(seq: int, **body) -> bytes:
    return encode_record(seq, 1, 3, 1_700_000_000_000 + seq, "event", 1, body or {"n": seq})


def write_segment(directory: Path, first: int, count: int, *, gz: bool = False) -> Path:
    data = b"".join(rec(s) for s in range(first, first + count))
    path = directory / segment_name(first, compressed=gz)
    if gz:
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


# --------------------------------------------------------------------------- the checksum rule


def test_golden_line_verifies_with_the_documented_rule():
    # the rule written out independently of the module: crc32 over "{" + line[18:]
    assert GOLDEN.startswith('{"crc":"') and GOLDEN[16:18] == '",'
    assert f"{zlib.crc32(('{' + GOLDEN[18:]).encode()):08x}" == GOLDEN[8:16]
    record = verify_line(GOLDEN)
    assert record == {
        "seq": 1, "controller_id": 1, "controller_epoch": 3, "at": 1700000000000,
        "type": "event", "v": 1, "body": {"kind": "BrokersChanged", "brokers": [1, 2, 3]},
    }


def test_writer_produces_the_golden_line():
    line = encode_record(1, 1, 3, 1700000000000, "event", 1, {"kind": "BrokersChanged", "brokers": [1, 2, 3]})
    assert line == GOLDEN.encode() + b"\n"


def test_crc_covers_the_object_without_its_crc_member():
    line = rec(5, topic="t\u00e9", x=[1.5, None, True]).decode()
    without = json.loads(line)
    del without["crc"]
    compact = json.dumps(without, separators=(",", ":"))  # same key order, ASCII escapes
    assert line[8:16] == f"{zlib.crc32(compact.encode()):08x}"
    assert line.isascii()


@pytest.mark.parametrize("form", ["str", "str+newline", "bytes", "bytes+newline"])
def test_verify_line_accepts_str_and_bytes_with_or_without_newline(form):
    line = rec(9)
    value = {
        "str": line[:-1].decode(), "str+newline": line.decode(),
        "bytes": line[:-1], "bytes+newline": line,
    }[form]
    assert verify_line(value)["seq"] == 9


def test_every_single_byte_flip_is_detected():
    line = bytearray(rec(3, name="abc"))
    for i in range(len(line) - 1):  # everything but the newline
        damaged = bytearray(line)
        damaged[i] ^= 0x04
        with pytest.raises(InvalidRecord):
            verify_line(bytes(damaged))


@pytest.mark.parametrize(
    "line, reason",
    [
        ("", "does not start"),
        ('{"seq":1}', "does not start"),
        ('{"crc":"D4A7FFB9",' + GOLDEN[18:], "lowercase"),
        ('{"crc":"d4a7ffb",' + GOLDEN[17:], "lowercase"),
        (GOLDEN[:-1], "checksum mismatch"),
    ],
)
def test_verify_line_reasons(line, reason):
    with pytest.raises(InvalidRecord, match=reason):
        verify_line(line)


def _with_crc(obj_text: str) -> str:
    return '{"crc":"%08x",' % zlib.crc32(obj_text.encode()) + obj_text[1:]


def test_checksummed_but_malformed_records_are_rejected():
    with pytest.raises(InvalidRecord, match="not valid JSON"):
        verify_line(_with_crc('{"seq":1,'))
    with pytest.raises(InvalidRecord, match="missing field 'body'"):
        verify_line(_with_crc('{"seq":1,"controller_id":1,"controller_epoch":1,"at":1,"type":"e","v":1}'))
    with pytest.raises(InvalidRecord, match="'seq' is bool"):
        verify_line(_with_crc('{"seq":true,"controller_id":1,"controller_epoch":1,"at":1,"type":"e","v":1,"body":{}}'))


# --------------------------------------------------------------------------- one segment


@pytest.mark.parametrize("gz", [False, True])
def test_iter_records_plain_and_gzip(tmp_path, gz):
    path = write_segment(tmp_path, 1, 50, gz=gz)
    assert [r["seq"] for r in iter_records(path)] == list(range(1, 51))


@pytest.mark.parametrize("gz", [False, True])
def test_damaged_line_is_reported_with_file_and_line(tmp_path, gz):
    data = bytearray(b"".join(rec(s) for s in range(1, 21)))
    lines = data.split(b"\n")
    offset = sum(len(l) + 1 for l in lines[:11]) + 30  # inside line 12
    data[offset] ^= 0x01
    path = tmp_path / segment_name(1, compressed=gz)
    path.write_bytes(gzip.compress(bytes(data)) if gz else bytes(data))
    with pytest.raises(JournalCorruption) as info:
        list(iter_records(path, tolerate_torn_tail=True))  # not the last line: never tolerated
    assert info.value.path == str(path) and info.value.line == 12
    assert f"{path}:12:" in str(info.value)


def test_torn_tail_is_an_error_unless_tolerated(tmp_path):
    path = write_segment(tmp_path, 1, 5)
    with open(path, "ab") as f:
        f.write(rec(6)[:40])
    with pytest.raises(JournalCorruption, match="no trailing newline") as info:
        list(iter_records(path))
    assert info.value.line == 6
    torn = []
    assert [r["seq"] for r in iter_records(path, tolerate_torn_tail=True, on_torn_tail=torn.append)] == [1, 2, 3, 4, 5]
    assert torn[0].line == 6 and torn[0].offset == path.stat().st_size - 40


def test_bad_last_line_with_newline_counts_as_torn(tmp_path):
    path = write_segment(tmp_path, 1, 3)
    with open(path, "ab") as f:
        f.write(b"\0\0\0\0\n")
    scan = scan_segment(path)
    assert scan.records == 3 and scan.last_record["seq"] == 3 and scan.torn.line == 4
    assert scan.good_bytes == path.stat().st_size - 5


def test_truncated_gzip_is_corruption(tmp_path):
    path = write_segment(tmp_path, 1, 200, gz=True)
    path.write_bytes(path.read_bytes()[:-30])
    with pytest.raises(JournalCorruption, match="cannot read segment"):
        list(iter_records(path, tolerate_torn_tail=True))


def test_seq_must_follow_within_a_segment_and_match_the_name(tmp_path):
    path = tmp_path / segment_name(1)
    path.write_bytes(rec(1) + rec(2) + rec(4))
    with pytest.raises(JournalCorruption, match="seq 4 follows 2") as info:
        list(iter_records(path))
    assert info.value.line == 3
    other = tmp_path / "x" / segment_name(10)
    other.parent.mkdir()
    other.write_bytes(rec(11))
    with pytest.raises(JournalGap, match="file name says 10"):
        list(iter_records(other))


# --------------------------------------------------------------------------- whole journals


def test_read_journal_in_seq_order_across_plain_and_gzip(tmp_path):
    write_segment(tmp_path, 1, 10, gz=True)
    write_segment(tmp_path, 11, 10, gz=True)
    write_segment(tmp_path, 21, 5)
    (tmp_path / ".lock").write_bytes(b"")
    (tmp_path / ".segment-00000000000000000021.jsonl.gz.tmp").write_bytes(b"junk")
    assert [r["seq"] for r in read_journal(tmp_path)] == list(range(1, 26))


def test_missing_segment_names_the_gap(tmp_path):
    write_segment(tmp_path, 1, 10, gz=True)
    write_segment(tmp_path, 21, 10, gz=True)
    with pytest.raises(JournalGap) as info:
        list(read_journal(tmp_path))
    err = info.value
    assert (err.expected, err.found) == (11, 21)
    assert "records 11..20 are missing" in str(err) and segment_name(21, True) in str(err)


def test_overlapping_segments_are_an_error(tmp_path):
    write_segment(tmp_path, 1, 10)
    write_segment(tmp_path, 5, 10)
    with pytest.raises(JournalGap, match="already reached seq 10"):
        list(read_journal(tmp_path))


def test_journal_may_start_after_retention(tmp_path):
    write_segment(tmp_path, 101, 3)
    assert [r["seq"] for r in read_journal(tmp_path)] == [101, 102, 103]


def test_plain_copy_wins_over_gzip_of_the_same_segment(tmp_path):
    write_segment(tmp_path, 1, 4)
    (tmp_path / segment_name(1, compressed=True)).write_bytes(b"half-written gzip")
    write_segment(tmp_path, 5, 1)
    assert [s.path.name for s in list_segments(tmp_path)] == [segment_name(1), segment_name(5)]
    assert [r["seq"] for r in read_journal(tmp_path)] == [1, 2, 3, 4, 5]


def test_torn_tail_only_tolerated_in_the_last_segment(tmp_path):
    first = write_segment(tmp_path, 1, 3)
    write_segment(tmp_path, 4, 3)
    with open(tmp_path / segment_name(4), "ab") as f:
        f.write(b'{"crc":"00')
    seen = []
    assert [r["seq"] for r in read_journal(tmp_path, on_torn_tail=lambda p, t: seen.append((p.name, t.line)))] == list(range(1, 7))
    assert seen == [(segment_name(4), 4)]
    with pytest.raises(JournalCorruption):
        list(read_journal(tmp_path, tolerate_torn_tail=False))
    with open(first, "ab") as f:  # the same defect in an earlier segment is corruption
        f.write(b'{"crc":"00')
    with pytest.raises(JournalCorruption) as info:
        list(read_journal(tmp_path))
    assert info.value.path == str(first) and info.value.line == 4


def test_find_journals_discovers_every_node(tmp_path):
    for node in ("node-1", "node-2", "rack-a/node-3"):
        d = tmp_path / node
        d.mkdir(parents=True)
        write_segment(d, 1, 1)
    (tmp_path / "empty").mkdir()
    (tmp_path / ".hidden").mkdir()
    write_segment(tmp_path / ".hidden", 1, 1)
    assert find_journals(tmp_path) == [tmp_path / "node-1", tmp_path / "node-2", tmp_path / "rack-a/node-3"]


def test_errors_survive_pickling():  # Spark ships exceptions from executors to the driver
    import pickle

    err = pickle.loads(pickle.dumps(JournalGap("/j/segment", 1, "gap", 11, 21)))
    assert (err.path, err.line, err.expected, err.found) == ("/j/segment", 1, 11, 21)
    err = pickle.loads(pickle.dumps(InvalidRecord("bad")))
    assert err.reason == "bad"


def test_reader_imports_only_the_standard_library():
    code = (
        "import sys; before = set(sys.modules); import adapters.journal.format; "
        "extra = {m.split('.')[0] for m in set(sys.modules) - before} - set(sys.stdlib_module_names) - {'adapters'}; "
        "print(sorted(extra))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.strip() == "[]"
