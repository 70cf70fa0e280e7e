"""The checkpoint manifest's quick check (replay/checkpoint.py): a segment is taken as audited
without being read only when its path, size and modification time are those recorded when it
was hashed; anything else is hashed again (plain Python, no Spark)."""
from __future__ import annotations

from replay import checkpoint
from replay.plan import SegmentSummary


def _manifest_with(path: str, disk: list[int]) -> checkpoint.Manifest:
    m = checkpoint.Manifest()
    h = checkpoint.Hashed(path, "/j/node-1", 7, "ab" * 32, 1234, None)
    summary = SegmentSummary("/j/node-1", path, *([0] * (len(SegmentSummary._fields) - 2)))
    m.record_segment(h, summary, "cluster-a", False, [])
    m.segments[checkpoint.seg_key("/j/node-1", 7)]["disk"] = disk
    return m


def test_a_segment_as_it_was_on_disk_keeps_its_recorded_hash():
    path = "/j/node-1/segment-00000000000000000007.jsonl"
    m = _manifest_with(path, [5000, 1_700_000_000_123])
    got = m.unchanged_on_disk([(path, "/j/node-1", 7)], {path: [5000, 1_700_000_000_123]})
    assert got[path].sha == "ab" * 32 and got[path].chars == 1234
    status, found = m.classify(list(got.values()), lambda j: j)
    assert status == {path: "known"} and found == []


def test_a_touched_resized_renamed_or_unrecorded_segment_is_hashed_again():
    path = "/j/node-1/segment-00000000000000000007.jsonl"
    m = _manifest_with(path, [5000, 1_700_000_000_123])
    listed = [(path, "/j/node-1", 7)]
    assert m.unchanged_on_disk(listed, {path: [5000, 1_700_000_000_124]}) == {}  # touched, or rewritten in place
    assert m.unchanged_on_disk(listed, {path: [5001, 1_700_000_000_123]}) == {}  # grew
    gz = path + ".gz"  # compressed after it closed: the same content under another name
    assert m.unchanged_on_disk([(gz, "/j/node-1", 7)], {gz: [5000, 1_700_000_000_123]}) == {}
    other = "/j/node-1/segment-00000000000000000009.jsonl"
    assert m.unchanged_on_disk([(other, "/j/node-1", 9)], {other: [5000, 1_700_000_000_123]}) == {}
    old = checkpoint.Manifest.parse(m.dumps())  # a manifest written before sizes and times were kept
    del old.segments[checkpoint.seg_key("/j/node-1", 7)]["disk"]
    assert old.unchanged_on_disk(listed, {path: [5000, 1_700_000_000_123]}) == {}
