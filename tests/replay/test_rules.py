"""The per-partition rules as window functions (replay/rules.py) find exactly what the Python
walk (audit.audit_partition) finds, detail text included, on random timelines made to break
every rule: versions read twice with other values, ISRs outside the assignment across
reassignments, leader epochs going back, stale writers, deletions starting new incarnations."""
from __future__ import annotations

import random

import pytest

from replay import audit

from .test_job import spark  # noqa: F401 (the module's SparkSession fixture)

pytestmark = pytest.mark.spark

KINDS = ("write", "write", "write", "observed", "conflict", "elected", "deleted")


def random_timeline(rng: random.Random, topic: str, partition: int, seq0: int) -> list[dict]:
    rows = []
    assignment = [1, 2, 3]
    for k in range(rng.randint(1, 14)):
        kind = rng.choice(KINDS)
        if rng.random() < 0.2:
            assignment = rng.sample([1, 2, 3, 4, 5], 3)
        isr = rng.sample(assignment + [rng.randint(1, 6)], rng.randint(0, 3))
        rows.append({"time": 1000 + rng.randint(0, 40) * 10, "journal": rng.choice(["node-1", "node-2"]),
                     "controller_id": 1, "epoch": 1, "topic": topic, "partition": partition,
                     "leader": rng.choice([-1] + isr + [rng.randint(1, 6)]), "leader_epoch": rng.randint(0, 6),
                     "isr": isr, "controller_epoch": rng.randint(1, 4), "zk_version": rng.randint(0, 5),
                     "replicas": rng.choice([assignment, assignment, []]), "adding": [], "removing": [],
                     "kind": kind, "change": None, "cause_type": "X", "cause_seq": seq0 + k, "seq": seq0 + k,
                     "file": f"/j/{topic}/segment.jsonl", "line": k + 1})
    return rows


def test_window_rules_agree_with_the_python_walk(spark):  # noqa: F811
    from replay import job, rules

    rng = random.Random(18)
    timelines = [random_timeline(rng, f"t{k % 7}", k, 100 * k) for k in range(400)]
    expected = []
    for rows in timelines:
        expected += audit.audit_partition(rows, audit.DownIndex([]), [], 2000)[0]
    assert {f["rule"] for f in expected} == {"version-conflict", "isr-empty", "leader-not-in-isr",
                                             "isr-outside-assignment", "leader-epoch", "stale-controller-write"}
    df = spark.createDataFrame([r for rows in timelines for r in rows], job.SCHEMAS["timeline"])
    got = [r.asDict() for r in rules.timeline_rules(df).collect()]

    def key(f):
        return tuple(str(f[k]) for k in ("topic", "partition", "seq", "rule", "detail", "journal", "file", "line",
                                         "time", "severity"))

    assert sorted(map(key, got)) == sorted(map(key, expected))


def test_the_measurements_read_only_the_columns_the_job_gives_them():
    """The Spark job hands the executors' measurements (offline time, recovery, leader counts)
    only `job.MEASURED` of each timeline row: they come out the same as from whole rows."""
    from replay import job

    rng = random.Random(7)
    down = audit.DownIndex([{"broker": 2, "start": 1000, "end": 1200, "state": "down"},
                            {"broker": 3, "start": 1100, "end": 1400, "state": "down"}])
    failures = [{"failure": 0, "broker": 2, "time": 1000}, {"failure": 1, "broker": 3, "time": 1100}]
    seen = {"offline": 0, "recoveries": 0, "deltas": 0}
    for k in range(200):
        rows = random_timeline(rng, f"t{k % 5}", k, 100 * k)
        whole = audit.audit_partition(rows, down, failures, 2000, rules=False)
        narrow = audit.audit_partition([{c: r[c] for c in job.MEASURED} for r in rows], down, failures, 2000,
                                       rules=False)
        assert narrow == whole
        for kind, part in zip(("offline", "recoveries", "deltas"), whole[1:]):
            seen[kind] += bool(part)
    assert min(seen.values()) > 0, seen  # offline spans, recoveries and leader changes were measured
