"""Incremental audits (replay/checkpoint.py) on local[2]: a second run over the same --out and a
grown journal re-executes only what is new and ends with the same tables and verdict as a run
from scratch; an audited segment whose bytes changed is a violation, not skipped."""
from __future__ import annotations

import json
import shutil

import pytest
from pyspark.sql import functions as F

from adapters.journal.format import list_segments

from .helpers import copy_tree, flip_byte, generate_subprocess, read_lines
from .test_job import plain_replay, spark  # noqa: F401 (the module's SparkSession fixture)

pytestmark = pytest.mark.spark

WITHHELD = 2  # segments per journal that appear only for the second run


@pytest.fixture(scope="module")
def full_journal(tmp_path_factory):
    root = tmp_path_factory.mktemp("inc") / "journals"
    generate_subprocess(root, events=2500, partitions=120, seed=5, segment_bytes=40_000)
    return root


def withhold(root, store):
    """Move each journal's last WITHHELD segments to `store` (the journal as it was earlier)."""
    moved = []
    for node in sorted(p for p in root.iterdir() if p.is_dir()):
        for seg in list_segments(node)[-WITHHELD:]:
            (store / node.name).mkdir(parents=True, exist_ok=True)
            moved.append((seg.path, store / node.name / seg.path.name))
            shutil.move(seg.path, moved[-1][1])
    return moved


def stats(out):
    return json.loads((out / "summary.json").read_text())


def table_counts(spark, out, names):  # noqa: F811
    return {name: spark.read.parquet(str(out / name)).count() for name in names}


MEASURED_SERIES = ("offline", "leaders", "events", "buckets", "bucket_ms")  # (not the replay's own timings)


def assert_measured_alike(spark, out, whole, journal):  # noqa: F811
    """The tables, findings, charts and statistics of an incremental run over `out` are those of
    a run from scratch (into `whole`)."""
    from replay import job

    assert job.run(spark, str(journal), str(whole), quiet=True, full=True) == 0
    for name in ("partition_offline", "broker_failures", "findings"):
        rows = [sorted(tuple(r.asDict()[k] for k in sorted(r.asDict()) if k not in ("date", "unit"))
                       for r in spark.read.parquet(str(o / name)).collect()) for o in (out, whole)]
        assert rows[0] == rows[1], name
    got, want = stats(out), stats(whole)
    assert {k: got["series"][k] for k in MEASURED_SERIES} == {k: want["series"][k] for k in MEASURED_SERIES}
    assert sum(got["series"]["offline"]) and any(sum(v) for v in got["series"]["leaders"].values())
    for key in ("offline_ms_per_partition", "recovery_ms_per_failure"):
        assert got["stats"][key] == want["stats"][key], key
    assert got["stats"]["recovery_ms_per_failure"]["count"] > 0


@pytest.fixture(scope="module")
def small_journal(tmp_path_factory):
    root = tmp_path_factory.mktemp("inc-small") / "journals"
    generate_subprocess(root, events=1200, partitions=40, seed=9, segment_bytes=20_000)
    return root


@pytest.mark.timeout(900)
def test_an_audit_resumed_from_the_last_runs_cut_finds_and_measures_what_a_whole_one_does(
        spark, small_journal, tmp_path):  # noqa: F811
    """The second run walks only the partitions' rows at or after the first run's cut, from the
    states the first run kept (replay/carry.py); its findings, offline times, recoveries and
    charts are a run from scratch's. A third run over a journal whose audited history changed
    walks the whole timeline again."""
    from replay import job

    journal = copy_tree(small_journal, tmp_path / "j")
    moved = withhold(journal, tmp_path / "later")
    out = tmp_path / "out"
    assert job.run(spark, str(journal), str(out), quiet=True) == 0
    for src, dst in moved:
        shutil.move(dst, src)
    assert job.run(spark, str(journal), str(out), quiet=True) == 0
    assert stats(out)["stats"]["incremental"]["audit"] == "resumed at the last run's cut"
    assert_measured_alike(spark, out, tmp_path / "whole", journal)

    first = min((list_segments(n)[0].path for n in journal.iterdir() if n.is_dir()),
                key=lambda p: json.loads(read_lines(p)[0])["at"])
    flip_byte(first, line=3)  # the cluster's first segment: before the cut
    assert job.run(spark, str(journal), str(out), quiet=True) == 1
    assert stats(out)["stats"]["incremental"]["audit"].startswith(
        "whole timeline: a unit re-executed or superseded now starts before the last run's cut")


@pytest.mark.slow  # three Spark runs and a plain replay: a few minutes
@pytest.mark.timeout(1200)
def test_a_grown_journal_re_executes_only_the_new_segments_and_matches_a_full_run(spark, full_journal,  # noqa: F811
                                                                                   tmp_path):
    from replay import job

    journal = copy_tree(full_journal, tmp_path / "j")
    moved = withhold(journal, tmp_path / "later")
    nodes = len({src.parent for src, _ in moved})
    out = tmp_path / "out"
    assert job.run(spark, str(journal), str(out), quiet=True) == 0
    first = stats(out)["stats"]
    assert first["incremental"]["units_reused"] == 0

    for src, dst in moved:  # the journals grow
        shutil.move(dst, src)
    expected = plain_replay(journal)
    assert job.run(spark, str(journal), str(out), quiet=True) == 0
    second = stats(out)["stats"]
    inc = second["incremental"]
    # the new segments, plus each journal's previous last segment (its last unit's range was
    # "to the end of the journal" and now ends at the next snapshot)
    assert inc["segments_read"] == len(moved) + nodes
    assert inc["segments_hashed"] == len(moved)  # the others are as they were on disk
    assert first["incremental"]["audit"] == "whole timeline: no carry from an earlier run"
    assert inc["audit"] == "resumed at the last run's cut", inc["audit"]
    assert inc["units_executed"] == len(moved) + nodes
    assert inc["units_reused"] == first["units"] - nodes
    assert second["units"] == first["units"] + len(moved)
    assert second["events"] == expected["counts"]["events"]

    counts = table_counts(spark, out, job.TABLES)
    for name in ("partition_timeline", "elections", "events", "controller_terms", "reassignments",
                 "broker_intervals", "partition_offline", "broker_failures", "findings"):
        assert counts[name] == expected["counts"][name], name
    findings = sorted([f["severity"], f["rule"], f["journal"], f["file"], f["line"], f["seq"]]
                      for f in (r.asDict() for r in spark.read.parquet(str(out / "findings")).collect()))
    assert findings == expected["findings"]

    assert_measured_alike(spark, out, tmp_path / "whole", journal)

    # nothing new: nothing re-executed, the same verdict
    assert job.run(spark, str(journal), str(out), quiet=True) == 0
    assert stats(out)["stats"]["incremental"]["units_executed"] == 0
    assert stats(out)["stats"]["incremental"]["segments_hashed"] == 0
    assert stats(out)["stats"]["incremental"]["audit"] == "resumed at the last run's cut"
    assert table_counts(spark, out, ("partition_timeline", "events", "findings")) == \
        {k: counts[k] for k in ("partition_timeline", "events", "findings")}


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_an_audited_segment_that_changed_is_a_violation_until_a_full_run(spark, full_journal, tmp_path,  # noqa: F811
                                                                         capsys):
    """The change is reported with the file, the damaged line too (the segment is read again);
    --full starts from scratch and forgets the change, not the damage."""
    from replay import job

    journal = copy_tree(full_journal, tmp_path / "j")
    out = tmp_path / "out"
    assert job.run(spark, str(journal), str(out), quiet=True) == 0
    node = sorted(p for p in journal.iterdir() if p.is_dir())[0]
    changed = list_segments(node)[1].path
    flip_byte(changed, line=3)
    capsys.readouterr()
    assert job.run(spark, str(journal), str(out)) == 1
    printed = capsys.readouterr().out
    assert f"segment-changed: {node.name}/{changed.name}:1" in printed
    rows = [r.asDict() for r in spark.read.parquet(str(out / "findings")).collect()]
    assert sorted((f["rule"], f["file"]) for f in rows if f["severity"] == "violation") == \
        [("corrupt-record", str(changed)), ("segment-changed", str(changed))]

    # --full forgets the checkpoint: the damaged line is still there, the change record is not
    assert job.run(spark, str(journal), str(out), quiet=True, full=True) == 1
    assert [f["rule"] for f in (r.asDict() for r in spark.read.parquet(str(out / "findings")).collect())
            if f["severity"] == "violation"] == ["corrupt-record"]


def test_the_unclean_election_rule_as_a_dataframe_filter_agrees_with_the_python_rule(spark):  # noqa: F811
    from replay import audit, job

    base = {"time": 5, "decided_at": 4, "journal": "node-1", "controller_id": 1, "epoch": 2, "topic": "t",
            "partition": 0, "kind": "clean", "strategy": "offline", "leader_before": 1, "leader": 2,
            "leader_epoch": 3, "isr": [2], "unclean": True, "unclean_allowed": False, "admin_requested": False,
            "outcome": "landed", "cause_type": "BrokersChanged", "cause_seq": 9, "confirm_seq": 10,
            "file": "node-1/segment-00000000000000000001.jsonl", "line": 9}
    rows = [base, dict(base, unclean_allowed=True), dict(base, admin_requested=True), dict(base, outcome="conflict"),
            dict(base, unclean=False), dict(base, outcome=None, partition=1), dict(base, unclean_allowed=None,
                                                                                    partition=2)]
    df = spark.createDataFrame([(json.dumps(r),) for r in rows], "p STRING") \
        .select(F.from_json("p", job.SCHEMAS["election"]).alias("x")).select("x.*")
    got = sorted((r.asDict() for r in job.unclean_not_allowed(df).collect()), key=lambda f: f["partition"])
    assert got == sorted(audit.check_elections(rows), key=lambda f: f["partition"])
    assert len(got) == 3
