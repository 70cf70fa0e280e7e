"""The Spark job: on local[2] (the tables match the plain-Python replay; planted faults fail the
audit with file and line), and on local-cluster[2,1,1024], whose executors are separate JVMs
running a Python that sees neither the project nor its editable install: the code must arrive
in the zip the job ships."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from adapters.journal.format import list_segments

from .helpers import ROOT, copy_tree, flip_byte, generate_subprocess, read_lines, with_checksum, write_lines

pytestmark = pytest.mark.spark

FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"  # start-up dominates these small runs
CONF = {"spark.driver.extraJavaOptions": FAST_JVM, "spark.executor.extraJavaOptions": FAST_JVM,
        "spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1"}


@pytest.fixture(scope="module")
def journal(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark") / "journals"
    summary = generate_subprocess(root, events=2500, partitions=120, seed=5, segment_bytes=40_000)
    assert summary["events"] >= 2500
    return root


def plain_replay(root: Path) -> dict:
    """The plain-Python replay of a journal, with the hash seed Spark's workers use."""
    code = textwrap.dedent(f"""
        import json
        from replay import local
        r = local.replay({str(root)!r})
        print(json.dumps({{"counts": {{k: len(v) for k, v in r.tables.items()}},
                          "findings": sorted([f["severity"], f["rule"], f["journal"], f["file"], f["line"], f["seq"]]
                                             for f in r.findings)}}))
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def expected(journal):
    return plain_replay(journal)


@pytest.fixture(scope="module")
def faulty(journal, tmp_path_factory):
    """The journal with a flipped byte (the third segment of the journal with the most
    segments, line 3) and a deleted segment (the second of another journal with at least three):
    (root, flipped journal, flipped file, gone journal, deleted segment, the segment after it)."""
    root = copy_tree(journal, tmp_path_factory.mktemp("faulty") / "j")
    by_size = sorted((len(list_segments(d)), d.name) for d in root.iterdir() if d.is_dir())
    assert by_size[-1][0] >= 3 and by_size[-2][0] >= 3, f"the generated life has too few segments: {by_size}"
    flipped_journal, gone_journal = by_size[-1][1], by_size[-2][1]
    flipped = list_segments(root / flipped_journal)[2].path
    flip_byte(flipped, line=3)
    segs = list_segments(root / gone_journal)
    segs[1].path.unlink()
    return root, flipped_journal, flipped, gone_journal, segs[1], segs[2]


@pytest.fixture(scope="module")
def spark():
    from replay import job

    session = job.session("local[2]", conf=CONF)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def parquet_rows(spark, path):
    return [r.asDict() for r in spark.read.parquet(str(path)).collect()]


def test_local_job_passes_and_agrees_with_the_plain_replay(spark, journal, expected, tmp_path):
    from replay import job

    out = tmp_path / "out"
    started = time.perf_counter()
    assert job.run(spark, str(journal), str(out), quiet=True) == 0
    # (shown if the test fails: CI once timed out in the reads below, and whether the job
    # before them had been slow or the reads hung could not be told)
    print(f"job.run took {time.perf_counter() - started:.1f} s")
    for name in job.TABLES:
        assert (out / name).is_dir(), name
    counts = {}
    for name in job.TABLES:
        counts[name] = spark.read.parquet(str(out / name)).count()
        print(f"{name}: {counts[name]} rows, {time.perf_counter() - started:.1f} s since the job started")
    for name in ("partition_timeline", "elections", "events", "controller_terms", "reassignments",
                 "broker_intervals", "partition_offline", "broker_failures", "findings"):
        assert counts[name] == expected["counts"][name], name
    findings = sorted([f["severity"], f["rule"], f["journal"], f["file"], f["line"], f["seq"]]
                      for f in parquet_rows(spark, out / "findings"))
    assert findings == expected["findings"]
    assert all(f[0] == "info" for f in findings)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["passed"] and summary["stats"]["events"] == counts["events"]
    # the fold tasks end to end: their lines parsed before the fold, their rows written after it
    assert summary["stats"]["task_seconds"] > summary["stats"]["fold_seconds"] > summary["stats"]["step_seconds"] > 0
    assert "PASS" in (out / "report.html").read_text()
    for png in ("offline_partitions.png", "leaders_per_broker.png", "event_rate.png", "processing_time.png"):
        assert (out / png).stat().st_size > 5000


def test_the_fold_tasks_own_parquet_files_hold_what_sparks_writer_writes(spark, journal, tmp_path):
    """With a local --out the fold tasks write the big tables' files themselves (pyarrow), and
    read their local head segments themselves; the tables then hold exactly the rows, types and
    partition values (journal, date, unit) that Spark's reader and writer give them, also for
    journal names Spark escapes in directory names ("="), under a directory whose name a URI
    must escape (" ", "+", "#")."""
    from replay import job

    root = tmp_path / "journals of a+b #2"
    for i, node in enumerate(sorted(p for p in journal.iterdir() if p.is_dir())):
        copy_tree(node, root / ("rack=a" if i == 0 else "rack_b") / node.name)
    runs = {}
    left = tmp_path / "out-True" / job.STAGING / "1" / "partition_timeline" / "journal=x" / "date=y" / "unit=z"
    left.mkdir(parents=True)
    (left / "part-00000-fold.snappy.parquet").write_bytes(b"a run stopped while writing this")
    for direct in (True, False):
        out = tmp_path / f"out-{direct}"
        assert job.run(spark, str(root), str(out), quiet=True, direct_io=direct) == 0
        runs[direct] = out
    staged = list(runs[True].glob("*/*/*/unit=*/part-00000-fold.snappy.parquet"))
    assert staged and not list(runs[False].glob("*/*/*/unit=*/part-00000-fold.snappy.parquet"))
    assert not (runs[True] / job.STAGING).exists()  # nor what a stopped run left there
    assert any("journal=rack%3Da%2F" in str(f) for f in staged), "the journal name escaped as Spark escapes it"
    for name in job.PARTITIONED:
        got, want = (spark.read.parquet(str(runs[d] / name)) for d in (True, False))
        assert got.schema == want.schema, name
        cols = sorted(c for c in got.columns if c != "replay_us")  # (this run's own timing)
        rows = [sorted(repr(tuple(r)) for r in df.select(*cols).collect()) for df in (got, want)]
        assert rows[0] == rows[1], name
        assert len(rows[0]) > 0, name
        assert name == "findings" or {r["journal"] for r in got.select("journal").distinct().collect()} == {
            "rack=a/" + sorted(journal.iterdir())[0].name} | {f"rack_b/{n.name}" for n in sorted(
                p for p in journal.iterdir() if p.is_dir())[1:]}, name


def test_truncated_and_empty_segments_are_reported_as_the_plain_replay_reports_them(spark, journal, tmp_path):
    """A .gz segment cut in half (a disk or a copy that failed) cannot be read at all: the job
    does not stop there, it reports the segment on line 1 with the reader's error, the records
    it held as missing, and goes on with the rest, as `replay.local` does. An empty last
    segment (a writer stopped right after creating it) is a segment of no lines, as there
    (it used to end the job with a KeyError)."""
    from adapters.journal.format import segment_name
    from replay import job

    root = copy_tree(journal, tmp_path / "j")
    nodes = sorted((d for d in root.iterdir() if d.is_dir()), key=lambda d: -len(list_segments(d)))
    node = nodes[0]
    segments = list_segments(node)
    cut = next(s.path for s in segments[1:-1] if s.compressed)
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    last = list_segments(nodes[1])[-1]
    (nodes[1] / segment_name(last.first_seq + len(read_lines(last.path)))).touch()
    expected = plain_replay(root)
    out = tmp_path / "out"
    assert job.run(spark, str(root), str(out), quiet=True) == 1
    findings = parquet_rows(spark, out / "findings")
    corrupt = [f for f in findings if f["rule"] == "corrupt-record"]
    assert [(f["file"], f["line"], f["severity"]) for f in corrupt] == [(str(cut), 1, "violation")]
    assert corrupt[0]["detail"].startswith("cannot read the segment: Compressed file ended")
    assert any(f["rule"] == "missing-records" for f in findings)
    assert sorted([f["severity"], f["rule"], f["journal"], f["file"], f["line"], f["seq"]] for f in findings) == \
        expected["findings"]


def test_the_python_line_scan_checks_each_line_as_the_sql_scan_does(spark, journal, tmp_path):
    """With local segments the job checks their lines in Python tasks (replay/scan.py); Spark
    SQL checks them elsewhere (`job._lines`). Both give the same rows on a journal with damage
    of every kind planted, but for two things the Python scan does as `replay.local` does: a
    line that is not ok carries no seq, type or event seq (the SQL keeps what `from_json` could
    parse), and a record whose type is not a string is not ok (`from_json` makes a string of it)."""
    from replay import job
    from replay.records import verify_line

    root = copy_tree(journal, tmp_path / "j")
    nodes = sorted((d for d in root.iterdir() if d.is_dir()), key=lambda d: -len(list_segments(d)))
    assert len(list_segments(nodes[0])) >= 3
    seg = list_segments(nodes[0])[1].path
    lines = read_lines(seg)
    recs = [json.loads(line) for line in lines]
    out = list(lines)

    def planted(i, change):
        record = {k: v for k, v in recs[i].items() if k != "crc"}
        out[i] = with_checksum(change(record) or record)

    planted(2, lambda r: r.pop("at") and None)  # a field missing
    planted(3, lambda r: r.update(seq=str(r["seq"])))  # an int as a string
    planted(4, lambda r: r.update(v=True))  # a bool posing as an int
    planted(5, lambda r: r.update(type=5))  # the type not a string
    planted(6, lambda r: {"body": r["body"], **{k: v for k, v in r.items() if k != "body"}})  # another key order
    planted(7, lambda r: r.update(seq=1 << 64))  # beyond 64 bits
    planted(8, lambda r: r.update(controller_id=1.5))
    planted(9, lambda r: r.update(body={"x": "t\u00e9st \u2603", **r["body"]}))  # not ASCII: still ok
    assert out[10][8:16] != out[10][8:16].upper()
    out[10] = out[10][:8] + out[10][8:16].upper() + out[10][16:]  # the checksum right, but in capitals
    out[11] = b""
    flipped = bytearray(out[12])
    flipped[40] ^= 1
    out[12] = bytes(flipped)
    effects = [i for i in range(13, len(recs)) if recs[i]["type"] == "effects"]
    planted(effects[0], lambda r: r.update(body={**r["body"], "event_seq": str(r["body"]["event_seq"])}))
    planted(effects[1], lambda r: r.update(body={k: v for k, v in r["body"].items() if k != "event_seq"}))
    write_lines(seg, out)
    last = list_segments(nodes[0])[-1].path
    tail = read_lines(last)
    tail[-1] = tail[-1][:30] + b"\0" * 20  # unwritten space at the tail
    write_lines(last, tail)
    torn = list_segments(nodes[-1])[-1].path
    assert not torn.name.endswith(".gz")
    torn.write_bytes(torn.read_bytes()[:-40])  # no newline after the last line

    paths = [str(s.path) for node in nodes for s in list_segments(node)]
    key = ("path", "line")
    sql = {tuple(r[k] for k in key): r.asDict() for r in job._lines(spark, paths).collect()}
    own = {tuple(r[k] for k in key): r.asDict() for r in job._own_lines(spark, paths).collect()}
    assert own.keys() == sql.keys() and len(own) > 2000
    type_not_str = (str(seg), 6)
    assert sql[type_not_str]["ok"] and sql[type_not_str]["type"] == "5" and not own[type_not_str]["ok"]
    with pytest.raises(ValueError, match="field 'type' is int"):
        verify_line(out[5])
    differ = []
    for k, s in sql.items():
        o = own[k]
        if not s["ok"] and k != type_not_str:
            assert o["seq"] is None and o["type"] is None and o["event_seq"] is None, k
            s = {**s, "seq": None, "type": None, "event_seq": None}
        if k != type_not_str and o != s:
            differ.append((s, o))
    assert differ == []
    bad = sorted(k[1] for k, r in own.items() if k[0] == str(seg) and not r["ok"])
    assert bad == [3, 4, 5, 6, 8, 9, 11, 12, 13]
    assert own[(str(seg), 7)]["ok"] and own[(str(seg), 10)]["ok"]  # another key order; not ASCII
    assert own[(str(seg), effects[0] + 1)]["ok"] and own[(str(seg), effects[0] + 1)]["event_seq"] is None
    assert [r["line"] for r in own.values() if r["torn"]] == [len(read_lines(torn)) + 1]
    assert own[(str(last), len(tail))]["has_nul"] and not own[(str(last), len(tail))]["ok"]
    assert sum(r["cluster_id"] is not None for r in own.values()) >= len(nodes)


def test_the_python_hash_of_local_segments_is_sparks(spark, journal, tmp_path):
    """The content hashes the checkpoint compares (`job._hash`), from Python tasks reading local
    segments and from Spark's reader: the same hash, length in characters and prefix hash, for
    plain and .gz segments, text that is not ASCII, and the same unreadable segment."""
    import gzip
    import shutil

    from replay import job

    node = max((d for d in journal.iterdir() if d.is_dir()), key=lambda d: len(list_segments(d)))
    segments = list_segments(node)
    d = tmp_path / "node-9"
    d.mkdir()
    plain = next(s.path for s in segments if not s.compressed)
    packed = next(s.path for s in segments if s.compressed)
    shutil.copy(plain, d / plain.name)
    shutil.copy(packed, d / packed.name)
    accented = d / "segment-00000000000000900000.jsonl"
    accented.write_bytes("caf\u00e9 \u2603 \U0001f600 line\n".encode() * 50)
    cut = d / "segment-00000000000000900100.jsonl.gz"
    cut.write_bytes(gzip.compress(plain.read_bytes())[:400])
    listed = [(str(p), str(d), job._name_seq(str(p))) for p in sorted(d.iterdir())]
    prefix = {str(accented): 77, str(d / packed.name): 1000}
    sparks = job._hash(spark, listed, prefix, {}, own_reads=False)
    own = job._hash(spark, listed, prefix, {}, own_reads=True)
    assert own == sparks
    hashed, unreadable = own
    assert [p for p, _, _ in unreadable] == [str(cut)] and len(hashed) == 3
    assert {h.path: h.chars for h in hashed}[str(accented)] == 50 * 14
    assert all((h.prefix_sha is not None) == (h.path in prefix) for h in hashed)


def test_usage_errors_exit_2(spark, tmp_path):
    from replay import job

    assert job.run(spark, str(tmp_path / "missing"), str(tmp_path / "out"), quiet=True) == 2
    (tmp_path / "empty").mkdir()
    assert job.run(spark, str(tmp_path / "empty"), str(tmp_path / "out"), quiet=True) == 2


@pytest.mark.timeout(900)  # the child process gets 600 s; three JVMs start on a possibly loaded machine
@pytest.mark.slow  # three JVMs; make test-slow
def test_job_on_a_local_cluster_catches_planted_faults(faulty, tmp_path):
    """local-cluster[2,1,1024]: a master, a worker and two executor JVMs. The executors' Python is
    started with -S (no site-packages, so no editable install of this project) and sees only
    attrs and immutables, and pyarrow and pandas (with their own dependencies; PySpark's Arrow
    stages need them on every node): controller_core and replay must come from the zip the job
    ships. The
    journal has a flipped byte and a missing segment: exit 1, findings with file and line, and
    the same tables and findings as the plain-Python replay of the same files."""
    journal, flipped_journal, flipped, gone_journal, gone, after = faulty
    expected = plain_replay(journal)
    site = Path(__import__("attrs").__file__).resolve().parents[1]
    deps = tmp_path / "executor-site"
    deps.mkdir()
    for name in ("attr", "attrs", "immutables", "pyarrow", "pandas", "numpy", "numpy.libs", "dateutil", "pytz",
                 "tzdata", "six.py"):
        if (site / name).exists():
            (deps / name).symlink_to(site / name)
    python = tmp_path / "executor-python"
    python.write_text(f"#!/bin/sh\nPYTHONPATH=\"$PYTHONPATH:{deps}\" exec {sys.executable} -S \"$@\"\n")
    python.chmod(0o755)
    out = tmp_path / "out"
    script = textwrap.dedent(f"""
        import json, sys
        from replay import job
        spark = job.session("local-cluster[2,1,1024]", conf={CONF!r})
        spark.sparkContext.setLogLevel("ERROR")
        code = job.run(spark, {str(journal)!r}, {str(out)!r}, quiet=True)
        where = spark.sparkContext.parallelize(range(4), 4).map(
            lambda _: (__import__("os").getpid(), __import__("replay").__file__, __import__("sys").flags.no_site)).collect()
        findings = [r.asDict() for r in spark.read.parquet({str(out / "findings")!r}).collect()]
        counts = {{name: spark.read.parquet({str(out)!r} + "/" + name).count() for name in job.TABLES}}
        print(json.dumps({{"code": code, "where": where, "counts": counts, "findings": findings}}))
        spark.stop()
    """)
    env = {**os.environ, "SPARK_WORKER_DIR": str(tmp_path / "worker"), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": str(python)}
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 1
    findings = result["findings"]
    corrupt = [f for f in findings if f["rule"] == "corrupt-record"]
    assert [(f["journal"], f["file"], f["line"], f["severity"]) for f in corrupt] == \
        [(flipped_journal, str(flipped), 3, "violation")]
    gap = [f for f in findings if f["rule"] == "missing-records"]
    assert [(f["journal"], f["file"], f["seq"]) for f in gap] == [(gone_journal, str(after.path), gone.first_seq)]
    assert sorted([f["severity"], f["rule"], f["journal"], f["file"], f["line"], f["seq"]] for f in findings) == \
        expected["findings"]
    for name in ("partition_timeline", "elections", "events", "controller_terms", "broker_intervals"):
        assert result["counts"][name] == expected["counts"][name], name
    assert "FAIL" in (out / "report.html").read_text()
    pids = {pid for pid, _, _ in result["where"]}
    assert os.getpid() not in pids
    assert all(".zip" in path and no_site == 1 for _, path, no_site in result["where"]), result["where"]


def test_journals_of_two_clusters_are_refused_in_one_line(spark, journal, tmp_path, capsys):
    """`--journal` on a parent folder holding two clusters' journals, and `--journal A B` naming
    them: exit 2 with one `error:` line naming both cluster ids, before anything is folded."""
    from replay import job
    from replay.generate import generate

    parent = tmp_path / "parent"
    copy_tree(journal, parent / "cluster-x")
    other = generate(parent / "cluster-y", events=300, partitions=20, seed=4, segment_bytes=20_000)["world"]
    capsys.readouterr()
    assert job.run(spark, str(parent), str(tmp_path / "out"), quiet=True) == 2
    assert job.run(spark, [str(parent / "cluster-x"), str(parent / "cluster-y")], str(tmp_path / "out2"),
                   quiet=True) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and all(ln.startswith("error: the journals belong to 2 clusters: ") for ln in lines)
    assert other.cluster_id in lines[0] and "cluster-x/node-" in lines[0] and "cluster-y/node-" in lines[0]
    assert not (tmp_path / "out" / "findings").exists()


def test_fold_units_are_packed_into_tasks_of_about_equal_size(tmp_path):
    """Each fold task reads several head segments (`job._packed`): every segment in exactly one
    task, no more tasks than asked for, the largest first, and no task more than one segment
    heavier than the lightest."""
    import random

    from replay import job

    rng = random.Random(5)
    sizes = [rng.choice((1, 50, 400, 3000, 20_000)) + rng.randrange(100) for _ in range(57)]
    paths = []
    for k, size in enumerate(sizes):
        p = tmp_path / f"segment-{k:020d}.jsonl"
        p.write_bytes(b"x" * size)
        paths.append(str(p))
    for tasks in (1, 4, 8, 57, 100):
        groups = job._packed(paths, tasks)
        assert len(groups) == min(tasks, len(paths))
        assert sorted(p for g in groups for p in g) == sorted(paths)
        weights = [sum(job._size(p) for p in g) for g in groups]
        assert weights == sorted(weights, reverse=True)
        assert weights[0] - weights[-1] <= max(sizes)
    assert job._packed([], 8) == []
