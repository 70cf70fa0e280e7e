"""Journals say which cluster wrote them: the replay refuses to audit two clusters as one, and
`--journal` takes several directories of one cluster."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from adapters.journal.writer import Journal
from replay import local
from replay.generate import generate
from adapters.journal.format import list_segments, read_journal
from replay.plan import mixed_clusters

from .helpers import ROOT, read_lines


@pytest.fixture(scope="module")
def two_clusters(tmp_path_factory):
    """A parent folder holding two small generated cluster lives (different seeds)."""
    parent = tmp_path_factory.mktemp("two") / "journals"
    a = generate(parent / "cluster-a", events=400, partitions=20, seed=3, segment_bytes=20_000)
    b = generate(parent / "cluster-b", events=400, partitions=20, seed=4, segment_bytes=20_000)
    return parent, a["world"].cluster_id, b["world"].cluster_id


def test_the_writer_puts_the_cluster_id_first_in_every_snapshot_head(tmp_path):
    journal = Journal.open(tmp_path, 1, fsync="never", segment_bytes=300, compress_closed=False,
                           snapshot_provider=lambda: (0, {"state": {"x": 1}}), cluster_id="Q2x1c3Rlci1pZC0xMjM0NQ")
    for k in range(6):
        journal.append("event", {"type": "Nothing", "k": k}, controller_epoch=0, at=k)
    journal.close()
    heads = [r for r in read_journal(tmp_path) if r["type"] == "snapshot"]
    assert len(heads) >= 2 and all(r["body"] == {"cluster_id": "Q2x1c3Rlci1pZC0xMjM0NQ", "state": {"x": 1}}
                                   for r in heads)
    first = read_lines(list_segments(tmp_path)[0].path)[0]
    assert b'"body":{"cluster_id":"Q2x1c3Rlci1pZC0xMjM0NQ"' in first[:200]


def test_generated_journals_record_their_cluster(two_clusters):
    parent, a, b = two_clusters
    assert a != b and len(a) == 22
    segments = [seg for d in (parent / "cluster-a").iterdir() for seg in list_segments(d)]
    assert segments
    for seg in segments:
        assert json.loads(read_lines(seg.path)[0])["body"]["cluster_id"] == a


def test_a_parent_folder_of_two_clusters_is_refused_in_one_line(two_clusters):
    parent, a, b = two_clusters
    with pytest.raises(local.MixedClusters) as exc:
        local.replay(parent)
    message = str(exc.value)
    assert "\n" not in message and "2 clusters" in message
    for cid, name in ((a, "cluster-a"), (b, "cluster-b")):
        journals = sorted(f"{name}/{d.name}" for d in (parent / name).iterdir() if list_segments(d))
        assert f"{cid} ({', '.join(journals)})" in message
    with pytest.raises(local.MixedClusters):
        local.replay([parent / "cluster-a", parent / "cluster-b" / "node-2"])


def test_several_directories_of_one_cluster_replay_together(two_clusters):
    parent, _, _ = two_clusters
    whole = local.replay(parent / "cluster-a")
    split = local.replay(sorted((parent / "cluster-a").iterdir()))
    assert whole.passed and split.passed
    assert {k: len(v) for k, v in split.tables.items()} == {k: len(v) for k, v in whole.tables.items()}
    assert sorted(f["journal"] for f in split.tables["controller_terms"]) == \
        sorted(f["journal"] for f in whole.tables["controller_terms"])


def test_a_journal_whose_segments_name_two_clusters_is_refused():
    found = mixed_clusters([("/j/node-1", "/j/node-1/segment-1.jsonl", "AAA"),
                            ("/j/node-1", "/j/node-1/segment-9.jsonl", "BBB")], lambda j: j.rsplit("/", 1)[-1])
    assert found == "journal node-1 holds segments of 2 clusters (AAA from segment-1.jsonl, BBB from " \
                    "segment-9.jsonl); replay each on its own"
    # journals written before the id was recorded go with the others
    assert mixed_clusters([("/j/node-1", "/j/node-1/s1", "AAA"), ("/j/node-2", "/j/node-2/s1", None)]) is None


def test_local_cli_refuses_two_clusters(two_clusters):
    # in a child process: replay.local re-executes itself to pin PYTHONHASHSEED
    parent, _, _ = two_clusters
    proc = subprocess.run([sys.executable, "-m", "replay.local", "--journal", str(parent)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: the journals belong to 2 clusters") and proc.stderr.count("\n") == 1
