"""The replay and audit as a PySpark job.

    spark-submit --py-files dist/kctl-replay.zip replay/job.py --journal DIR --out DIR
    kctl replay --journal DIR --out DIR        # the same job, locally
    run(spark, journal, out) -> exit code      # from Python, on an existing SparkSession

Exit status: 0 when the audit passes, 1 when it finds a violation, 2 on usage errors.

Stages (what runs where):

1. Read every `segment-<seq>.jsonl[.gz]` under `--journal` with Spark's text reader (whole
   files, so that each line keeps its number), split into lines, and check each line's checksum
   with the SQL expression of `adapters/journal/format.py`, on the executors. Bad lines become
   findings with file and line; nothing is parsed permissively into nulls and dropped.
2. Summarise each segment (one row per file) and, on the driver, check gaps and overlaps between
   segments and plan the fold units (`replay.plan`).
3. Route every record to its unit and fold the units on the executors, one unit per task, through
   `controller_core.step()` (`replay.tasks.fold_units`).
4. On the driver, stitch the small cross-unit results (`replay.history.assemble`); on the
   executors, walk each partition's timeline (`replay.tasks.walk_partitions`; from the last run's
   carry when it holds, replay/carry.py).
5. Write the Parquet tables and the report under `--out`; print the summary. With a local
   `--out`, the fold tasks of step 3 have already written the four big tables' files of their
   units themselves (pyarrow, staged until the fold is over), so Spark writes only the rest.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __name__ == "__main__" and __package__ in (None, ""):
    # `spark-submit replay/job.py` from a checkout: make the project importable on the driver
    # (the executors get the zip that `package.ship` builds from it)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.storagelevel import StorageLevel  # noqa: E402

from replay import carry, checkpoint, history, package, report  # noqa: E402
from replay.plan import INF, SegmentSummary, Unit, check_segments, finding, mixed_clusters, plan_units  # noqa: E402
from replay.tasks import BIG, WALK_SCHEMA  # noqa: E402

TABLES = {
    "partition_timeline": "every partition state ZooKeeper accepted or the controllers observed: time, controller and "
                          "epoch, leader, leader epoch, ISR, assignment, znode version, and the event that caused it",
    "broker_intervals": "up/down intervals of every broker",
    "controller_terms": "controller epochs: who held them, from when to when, and how each ended",
    "reassignments": "partition reassignments: start, end, duration, outcome",
    "elections": "leader elections by kind (clean, unclean, preferred, controlled_shutdown, reassign, initial) and "
                 "the outcome of their write",
    "events": "one row per re-executed event: type, commands, digest check, replay time, `at` delta",
    "findings": "every finding: rule, severity, journal, file, line, seq, detail",
    "partition_offline": "offline time per partition",
    "broker_failures": "broker failures and the time until every partition they led had a live leader again",
}

# appended per fold unit (replay/checkpoint.py): journal=<journal>/date=<UTC day>/unit=<unit id>
PARTITIONED = ("partition_timeline", "elections", "events", "findings")
TABLE_OF = dict(zip(BIG, PARTITIONED))  # the fold's big row sets (replay/tasks.py) and their tables
STAGING = "_staging"  # under --out: the fold tasks' own Parquet files until step 4 moves them in

WALKED = ("topic", "partition", "time", "kind", "zk_version", "leader", "seq", "journal", "leader_epoch", "isr",
          "controller_epoch", "replicas", "file", "line", "epoch")
"""The timeline columns the executors' walk of each partition reads (`audit.PartitionWalk`: the
rules, and the offline time, recoveries and leaders per broker): the adding and removing
replicas, the controller, the change and its cause (a third of the data) are not shipped."""
CARRY_SCHEMAS = {"state": "topic STRING, `partition` INT, carry STRING", "deltas": "t BIGINT, b INT, d INT",
                 "recoveries": "failure INT, ms BIGINT"}
"""The parts of the audit's carry (replay/carry.py) besides its findings (the findings table's schema)."""

SCHEMAS = {
    "timeline": "time BIGINT, journal STRING, controller_id INT, epoch INT, topic STRING, `partition` INT, leader INT, "
                "leader_epoch INT, isr ARRAY<INT>, controller_epoch INT, zk_version INT, replicas ARRAY<INT>, "
                "adding ARRAY<INT>, removing ARRAY<INT>, kind STRING, change STRING, cause_type STRING, "
                "cause_seq BIGINT, seq BIGINT, file STRING, line INT",
    "election": "time BIGINT, decided_at BIGINT, journal STRING, controller_id INT, epoch INT, topic STRING, "
                "`partition` INT, kind STRING, strategy STRING, leader_before INT, leader INT, leader_epoch INT, "
                "isr ARRAY<INT>, unclean BOOLEAN, unclean_allowed BOOLEAN, admin_requested BOOLEAN, outcome STRING, "
                "cause_type STRING, cause_seq BIGINT, confirm_seq BIGINT, file STRING, line INT",
    "event": "journal STRING, controller_id INT, seq BIGINT, time BIGINT, type STRING, controller_epoch INT, "
             "commands INT, digest_ok BOOLEAN, replay_us DOUBLE, at_delta_ms BIGINT, queue_ms DOUBLE, "
             "live_step_us DOUBLE, live_process_us DOUBLE, file STRING, line INT",
    "finding": "rule STRING, severity STRING, journal STRING, file STRING, line INT, seq BIGINT, time BIGINT, "
               "topic STRING, `partition` INT, detail STRING",
    "offline": "topic STRING, `partition` INT, offline_ms BIGINT, offline_intervals INT",
    "broker_intervals": "broker INT, state STRING, start BIGINT, `end` BIGINT, duration_ms BIGINT, epoch INT, "
                        "journal STRING, seq BIGINT, reason STRING, broker_epoch BIGINT",
    "controller_terms": "journal STRING, controller_id INT, epoch INT, start BIGINT, `end` BIGINT, duration_ms BIGINT, "
                        "reason STRING, start_seq BIGINT, end_seq BIGINT, file STRING, line INT",
    "reassignments": "topic STRING, `partition` INT, start BIGINT, `end` BIGINT, duration_ms BIGINT, outcome STRING, "
                     "origin ARRAY<INT>, target ARRAY<INT>, start_epoch INT, end_epoch INT, terms INT, journal STRING, "
                     "seq BIGINT",
    "broker_failures": "failure INT, broker INT, time BIGINT, journal STRING, seq BIGINT, partitions INT, "
                       "unrecovered INT, recovery_ms BIGINT, median_partition_ms BIGINT",
}

CRC_OK = ("substring(text, 1, 8) = '{\"crc\":\"' AND substring(text, 17, 2) = '\",' AND "
          "lower(lpad(hex(crc32(concat('{', substring(text, 19)))), 8, '0')) = substring(text, 9, 8)")
HEADER_FIELDS = "seq BIGINT, controller_id BIGINT, controller_epoch BIGINT, at BIGINT, type STRING, v BIGINT"
SEGMENT_RE = r"^segment-(\d{20})\.jsonl(\.gz)?$"
CLUSTER_ID_RE = r'"type":"snapshot","v":\d+,"body":\{"cluster_id":"([^"]*)"'


class UsageError(Exception):
    """Bad input (exit 2)."""


def _norm(uri: str) -> str:
    """A file URI as a plain path (`file:/a/b`, `file:///a/b` -> `/a/b`); other URIs unchanged."""
    if uri.startswith("file:"):
        rest = uri[5:]
        while rest.startswith("//"):
            rest = rest[1:]
        return rest
    return uri


def _list_segments(spark: SparkSession, journals: str | list[str]) -> tuple[str, list[str], dict[str, list[int]]]:
    """The root journal names are shown relative to (the one `--journal`, or the common parent of
    several), every segment file under them (plain wins over .gz), and each file's size in bytes
    and modification time in ms, via Hadoop's file system API: the driver lists, nobody reads yet."""
    import re
    import urllib.parse

    sc = spark.sparkContext
    jvm = sc._jvm
    roots, files = [], set()
    for journal in [journals] if isinstance(journals, str) else journals:
        path = jvm.org.apache.hadoop.fs.Path(journal)
        fs = path.getFileSystem(sc._jsc.hadoopConfiguration())
        if not fs.exists(path):
            raise UsageError(f"--journal {journal} does not exist")
        if not fs.getFileStatus(path).isDirectory():
            raise UsageError(f"--journal {journal} is not a directory")
        roots.append(_norm(fs.makeQualified(path).toString()).rstrip("/"))
        files.update(spark.read.option("recursiveFileLookup", "true").option("pathGlobFilter", "segment-*")
                     .text(journal).inputFiles())
    root = roots[0] if len(set(roots)) == 1 else _common_parent(roots)
    pattern = re.compile(SEGMENT_RE)
    chosen: dict[tuple[str, str], str] = {}
    # Spark lists files as URIs ("a b" as "a%20b"); the job names them by their paths
    for f in sorted({_norm(urllib.parse.unquote(x)) for x in files}):
        directory, name = f.rsplit("/", 1)
        m = pattern.match(name)
        if m is None:
            continue
        key = (directory, m.group(1))
        if key in chosen and name.endswith(".gz"):
            continue  # the plain copy survived a crash mid-compression: it is authoritative
        chosen[key] = f
    if not chosen:
        raise UsageError(f"--journal {' '.join(roots)}: no journal segments (segment-<seq>.jsonl[.gz]) found")
    stats = {}
    for f in chosen.values():
        path = jvm.org.apache.hadoop.fs.Path(_uri(f))
        st = path.getFileSystem(sc._jsc.hadoopConfiguration()).getFileStatus(path)
        stats[f] = [st.getLen(), st.getModificationTime()]
    return root, sorted(chosen.values()), stats


def _common_parent(roots: list[str]) -> str:
    """The longest common directory of several roots (`/a/x`, `/a/y` -> `/a`), on whole names."""
    parts = [r.split("/") for r in roots]
    common = []
    for names in zip(*parts):
        if len(set(names)) != 1:
            break
        common.append(names[0])
    return "/".join(common)


def _whole_files(spark: SparkSession, uris: list[str]) -> DataFrame:
    """One row per segment file (Spark's text reader, whole files; gzip is decompressed):
    path, journal, name_seq, value."""
    return (spark.read.text(uris, wholetext=True)
            # the file's URI decoded to its path, as `_list_segments` names it (a "+" is literal
            # in a URI, not a space: kept by quoting it before `url_decode`)
            .select(F.regexp_replace(F.url_decode(F.replace(F.col("_metadata.file_path"), F.lit("+"), F.lit("%2B"))),
                                     "^file:(//)?", "").alias("path"), "value")
            .withColumn("journal", F.regexp_extract("path", "^(.*)/[^/]*$", 1))
            .withColumn("name_seq", F.regexp_extract("path", r"segment-(\d{20})\.jsonl", 1).cast("bigint")))


def _display(root: str, directory: str) -> str:
    if directory == root:
        return "."
    if directory.startswith(root + "/"):
        return directory[len(root) + 1:]
    return directory


class _Store:
    """The tables and the checkpoint under `--out`, through Hadoop's file system (a local path,
    or hdfs:// and the like for spark-submit)."""

    def __init__(self, spark: SparkSession, out: str):
        sc = spark.sparkContext
        self.jvm = sc._jvm
        self.out = out.rstrip("/")
        self.Path = self.jvm.org.apache.hadoop.fs.Path
        self.fs = self.Path(self.out).getFileSystem(sc._jsc.hadoopConfiguration())

    @property
    def local_dir(self) -> str | None:
        """`out` as an absolute local path when it is on the local file system (also a path
        without a scheme under Hadoop's default file system "file:"), else None."""
        if self.fs.getUri().getScheme() != "file":
            return None
        return _norm(self.fs.makeQualified(self.Path(self.out)).toString())

    def read_text(self, rel: str) -> str | None:
        path = self.Path(f"{self.out}/{rel}")
        if not self.fs.exists(path):
            return None
        stream = self.fs.open(path)
        try:
            return self.jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()

    def write_text(self, rel: str, text: str) -> None:
        """Replace `rel` with `text`: written aside, then renamed over it."""
        target, tmp = self.Path(f"{self.out}/{rel}"), self.Path(f"{self.out}/{rel}.tmp")
        stream = self.fs.create(tmp, True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()
        self.fs.delete(target, False)
        if not self.fs.rename(tmp, target):
            raise OSError(f"cannot move {rel}.tmp over {rel} under {self.out}")

    def delete(self, rel: str) -> None:
        self.fs.delete(self.Path(f"{self.out}/{rel}"), True)

    def mkdirs(self, rel: str) -> None:
        self.fs.mkdirs(self.Path(f"{self.out}/{rel}"))

    def prune_carry(self, current: dict | None, before: dict | None) -> None:
        """Delete the audit carry's directories that `current` (the manifest's) does not use: the
        state and findings of `before`, and every directory that holds no slice of it."""
        keep = set(current["slices"]) if current else set()
        for st in self.fs.globStatus(self.Path(f"{self.out}/{carry.DIR}/*")) or []:
            rel = f"{carry.DIR}/{st.getPath().getName()}"
            if rel not in keep:
                self.fs.delete(st.getPath(), True)
        if before is not None and current is not None and before["dir"] != current["dir"] and before["dir"] in keep:
            for part in ("state", "findings"):
                self.delete(f"{before['dir']}/{part}")

    def drop_units(self, keep: set[str]) -> int:
        """Delete every unit directory of the partitioned tables whose unit id is not in `keep`."""
        dropped = 0
        for table in PARTITIONED:
            for st in self.fs.globStatus(self.Path(f"{self.out}/{table}/*/*/unit=*")) or []:
                if st.getPath().getName()[len("unit="):] not in keep:
                    self.fs.delete(st.getPath(), True)
                    dropped += 1
        return dropped


def _hash(spark: SparkSession, listed: list[tuple[str, str, int]], prefix: dict[str, int],
          known: dict[str, checkpoint.Hashed], own_reads: bool = True
          ) -> tuple[list[checkpoint.Hashed], list[tuple[str, str, int]]]:
    """The content hash of every listed segment (decompressed text), and of the prefix the
    manifest recorded, on the executors; the segments in `known` (unchanged on disk since they
    were audited, `Manifest.unchanged_on_disk`) are not read. Returns the hashes and the listed
    segments Spark could not read (a truncated .gz), which nothing reads after this: a finding
    (`_unreadable`), not the end of the job. (Only here: the job's own tables, read later, must
    not be skipped silently.) With `own_reads`, Python tasks read local segments themselves
    (`_own_hash`)."""
    todo = [p for p, _, _ in listed if p not in known]
    if not todo:
        return [known[p] for p, _, _ in listed], []
    if own_reads and all(_is_local(p) for p in todo):
        rows = _own_hash(spark, todo, prefix)
    else:
        pref = spark.createDataFrame(list(prefix.items()), "path STRING, pchars INT")
        with _conf(spark, "spark.sql.files.ignoreCorruptFiles", "true"):
            rows = (_whole_files(spark, [_uri(p) for p in todo]).select("path", "value")
                    .join(F.broadcast(pref), "path", "left")
                    .select("path", F.sha2("value", 256).alias("sha"), F.length("value").alias("chars"),
                            F.when(F.col("pchars").isNotNull(), F.sha2(F.expr("substring(value, 1, pchars)"), 256))
                            .alias("prefix")).collect())
    got = {r["path"]: r for r in rows if r["sha"] is not None}
    return ([known[p] if p in known else checkpoint.Hashed(p, j, n, got[p]["sha"], got[p]["chars"], got[p]["prefix"])
             for p, j, n in listed if p in known or p in got],
            [(p, j, n) for p, j, n in listed if p not in known and p not in got])


def _own_hash(spark: SparkSession, paths: list[str], prefix: dict[str, int]) -> list[dict]:
    """`_hash`'s rows from Python tasks (replay/scan.py `hash_arrow`); a segment that cannot be
    read has no hash."""
    from replay.scan import HASH_SCHEMA

    return [r.asDict() for r in _segment_tasks(spark, [(p, prefix.get(p)) for p in paths], "path STRING, pchars BIGINT",
                                               "hash_arrow", HASH_SCHEMA).collect()]


@contextlib.contextmanager
def _conf(spark: SparkSession, key: str, value: str):
    """The session's setting `key` is `value` inside (the actions run there read it), as it was
    after."""
    saved = spark.conf.get(key)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        spark.conf.set(key, saved)


def _unreadable(segments: list[tuple[str, str, int]], display) -> tuple[list[SegmentSummary], list[dict]]:
    """Segments Spark could not read, as `replay.local` reports them: each a summary of no lines
    (so that the records it held are reported missing, and its neighbours checked as usual) and
    a `corrupt-record` finding on its line 1, with the reader's error where this process can
    read the file itself."""
    from replay import local

    summaries, findings = [], []
    for path, journal, name_seq in segments:
        why = "Spark could not read it (a truncated or corrupt .gz?)"
        if _is_local(path):
            error = local.segment_lines(Path(path))[2]
            why = error if error is not None else why
        summaries.append(SegmentSummary(journal, path, name_seq, 0, False, None, None, None, None, None))
        findings.append(finding("corrupt-record", "violation", f"cannot read the segment: {why}",
                                journal=display(journal), file=path, line=1))
    return summaries, findings


def _unstage(stage: str, out: str) -> None:
    """Move the unit directories the fold tasks wrote under `stage` (<table>/journal=/date=/unit=)
    into the tables under `out`, then remove `stage`. After `_Store.drop_units`: a unit's rows
    appear in the tables only once the run is past its fold, as with Spark's own writer."""
    import shutil

    base = Path(stage)
    for unit_dir in sorted(base.glob("*/*/*/unit=*")):
        # (no directory there: `drop_units` removed every unit this run folds again)
        target = Path(out) / unit_dir.relative_to(base)
        target.parent.mkdir(parents=True, exist_ok=True)
        unit_dir.rename(target)
    shutil.rmtree(base, ignore_errors=True)
    try:
        base.parent.rmdir()  # STAGING itself, when no other run's stage is in it
    except OSError:
        pass


def _uri(p: str) -> str:
    return p if "://" in p else "file://" + p


def _lines_of(spark: SparkSession, paths: list[str], own_reads: bool) -> DataFrame:
    """Every line of the given segments with its checks (`scan.LINES_SCHEMA`): checked in
    Python tasks that read the segments themselves when `own_reads` and they are local files
    (`_own_lines`), else with Spark SQL (`_lines`)."""
    if own_reads and all(_is_local(p) for p in paths):
        return _own_lines(spark, paths)
    return _lines(spark, paths)


SEGMENTS_PER_SCAN_TASK = 8
"""About how many segments one task of the Python hash or line scan reads (`_segment_tasks`)."""


def _own_lines(spark: SparkSession, paths: list[str]) -> DataFrame:
    """`_lines` from Python tasks (replay/scan.py `lines_arrow`): on the million-event journal
    the SQL scan's executors spent about 12 us of JVM CPU a line (its split into rows, the
    checksum expression, `from_json` of each header)."""
    from replay.scan import LINES_SCHEMA

    return _segment_tasks(spark, [(p, p.rsplit("/", 1)[0], _name_seq(p)) for p in paths],
                          "path STRING, journal STRING, name_seq BIGINT", "lines_arrow", LINES_SCHEMA)


def _segment_tasks(spark: SparkSession, rows: list[tuple], schema: str, task: str, out_schema: str) -> DataFrame:
    """`out_schema` rows from Python tasks that each read about `SEGMENTS_PER_SCAN_TASK` local
    segments, grouped by size on disk (`_packed`): `rows` are the segments' input rows (the
    path first) and `task` the function of replay/scan.py that reads and answers them."""
    from pyspark.sql.pandas.types import to_arrow_schema

    sc = spark.sparkContext
    arrow_schema = to_arrow_schema(spark.createDataFrame([], out_schema).schema)
    row_of = {r[0]: r for r in rows}
    groups = _packed(list(row_of), max(4 * sc.defaultParallelism, -(-len(row_of) // SEGMENTS_PER_SCAN_TASK)))

    def run(batches):
        from replay import scan

        return getattr(scan, task)(batches, arrow_schema)

    return (spark.createDataFrame(sc.parallelize([[row_of[p] for p in g] for g in groups], len(groups))
                                  .flatMap(lambda group: group), schema)
            .mapInArrow(run, out_schema))


def _lines(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Every line of the given segments with its checks (executors; the text is not kept)."""
    files_df = _whole_files(spark, [_uri(f) for f in paths]).select(
        "path", "journal", "name_seq", F.split("value", "\n", -1).alias("arr")).withColumn("n", F.size("arr"))
    return (files_df.select("path", "journal", "name_seq", "n", F.posexplode("arr").alias("pos", "text"))
            .withColumn("line", (F.col("pos") + 1).cast("int"))
            .withColumn("is_last", F.col("pos") == F.col("n") - 1)
            .filter(~(F.col("is_last") & (F.col("text") == "")))
            .withColumn("torn", F.col("is_last"))
            .withColumn("crc_ok", F.expr(CRC_OK))
            # the header is parsed from the line's prefix up to "body" (the writer's key order);
            # a line written in another order falls back to parsing the whole line
            .withColumn("body_at", F.locate(',"body":', F.col("text")))
            .withColumn("h0", F.when(F.col("crc_ok") & (F.col("body_at") > 0), F.from_json(
                F.concat(F.expr("substring(text, 1, body_at - 1)"), F.lit("}")), HEADER_FIELDS)))
            .withColumn("h", F.when(F.col("crc_ok"), F.when(
                F.col("h0.seq").isNotNull() & F.col("h0.type").isNotNull() & F.col("h0.controller_id").isNotNull()
                & F.col("h0.controller_epoch").isNotNull() & F.col("h0.at").isNotNull() & F.col("h0.v").isNotNull(),
                F.col("h0")).otherwise(F.from_json("text", HEADER_FIELDS))))
            .select("journal", "path", "name_seq", "line", "torn",
                    (F.instr(F.col("text"), "\u0000") > 0).alias("has_nul"),
                    (F.col("crc_ok") & F.col("h.seq").isNotNull() & F.col("h.type").isNotNull()
                     & F.col("h.controller_id").isNotNull() & F.col("h.controller_epoch").isNotNull()
                     & F.col("h.at").isNotNull() & F.col("h.v").isNotNull()).alias("ok"),
                    "crc_ok", F.col("h.seq").alias("seq"), F.col("h.type").alias("type"),
                    F.when(F.col("crc_ok") & (F.col("h.type") == "effects"),
                           F.from_json("text", "body STRUCT<event_seq: BIGINT>").getField("body")
                           .getField("event_seq")).alias("event_seq"),
                    # the writer puts the cluster id first into a snapshot's body (adapters/journal/writer.py)
                    F.when(F.col("crc_ok") & (F.col("line") == 1) & (F.col("h.type") == "snapshot"),
                           F.nullif(F.regexp_extract(F.substring("text", 1, 400), CLUSTER_ID_RE, 1), F.lit("")))
                    .alias("cluster_id")))


def _scan(spark: SparkSession, lines: DataFrame, last_segment: dict[str, int], display: dict[str, str],
          paths: list[str]):
    """Summaries, cluster ids and line findings (bad lines, seq out of place) of the scanned
    segments `paths`, collected to the driver. An empty segment (a writer that stopped right
    after creating it) has no line: a summary of none, as `replay.local` makes it."""
    summary_rows = lines.groupBy("journal", "path", "name_seq").agg(
        F.max("line").alias("lines"),
        F.max(F.col("torn").cast("int")).alias("torn"),
        F.max(F.when((F.col("line") == 1) & F.col("ok"), F.col("type"))).alias("head_type"),
        F.max(F.when((F.col("line") == 1) & F.col("ok"), F.col("seq"))).alias("head_seq"),
        F.max(F.when((F.col("line") == 2) & F.col("ok"), F.col("type"))).alias("second_type"),
        F.max(F.when((F.col("line") == 2) & F.col("ok"), F.col("event_seq"))).alias("second_event_seq"),
        F.max(F.when(F.col("ok"), F.col("event_seq"))).alias("max_effects_event_seq"),
        F.max("cluster_id").alias("cluster_id"),
    ).collect()
    summaries = {r["path"]: SegmentSummary(r["journal"], r["path"], r["name_seq"], r["lines"], bool(r["torn"]),
                                           r["head_type"], r["head_seq"], r["second_type"], r["second_event_seq"],
                                           r["max_effects_event_seq"]) for r in summary_rows}
    clusters = {r["path"]: r["cluster_id"] for r in summary_rows}
    for path in paths:
        if path not in summaries:
            summaries[path] = SegmentSummary(path.rsplit("/", 1)[0], path, _name_seq(path), 0, False,
                                             None, None, None, None, None)
            clusters[path] = None
    last_df = spark.createDataFrame(list(last_segment.items()), "journal STRING, last_name_seq BIGINT")
    disp_df = spark.createDataFrame(list(display.items()), "journal STRING, shown STRING")
    bad = (lines.filter(~F.col("torn") & (~F.col("ok") | (F.col("seq") != F.col("name_seq") + F.col("line") - 1)))
           .join(F.broadcast(last_df), "journal").join(F.broadcast(disp_df), "journal")
           .join(F.broadcast(spark.createDataFrame([(s.path, s.lines) for s in summaries.values()],
                                                   "path STRING, lines INT")), "path"))
    rows = bad.select(
        # a complete bad last line is an unfinished write only if it holds NULs (unwritten space);
        # otherwise it is a damaged record, like the writer decides (adapters/journal/format.py)
        F.when(F.col("ok"), F.lit("seq-mismatch"))
         .when((F.col("name_seq") == F.col("last_name_seq")) & (F.col("line") == F.col("lines")) & F.col("has_nul"),
               F.lit("torn-tail"))
         .otherwise(F.lit("corrupt-record")).alias("rule"),
        F.when(~F.col("ok") & (F.col("name_seq") == F.col("last_name_seq")) & (F.col("line") == F.col("lines"))
               & F.col("has_nul"), F.lit("warning")).otherwise(F.lit("violation")).alias("severity"),
        F.col("shown").alias("journal"), F.col("path").alias("file"), F.col("line"),
        F.col("seq"), F.lit(None).cast("bigint").alias("time"), F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("int").alias("partition"),
        F.when(F.col("ok"), F.format_string("seq %d on line %d, expected %d", F.col("seq"), F.col("line"),
                                            F.col("name_seq") + F.col("line") - 1))
         .when(~F.col("crc_ok"), F.lit("checksum mismatch or malformed line (not {\"crc\":\"<8 hex>\",...})"))
         .otherwise(F.lit("checksum matches but the record lacks a required field or has a wrong type")).alias("detail"),
    ).collect()
    line_findings: dict[str, list[dict]] = {}
    for r in rows:
        line_findings.setdefault(r["file"], []).append(r.asDict())
    return summaries, clusters, line_findings


def _fold(spark: SparkSession, lines: DataFrame, units: list, display: dict, uids: dict[int, str],
          stage: str | None = None, own_reads: bool = True) -> DataFrame:
    """Re-execute the given units: a task folds about `UNITS_PER_TASK` of them, each from its
    head segment, when the tasks can read those themselves, else one unit per task from the text
    Spark read; the few records of a unit that lie in other segments (the tail of a batch before a roll, or
    every record of a segment without a snapshot head) are looked up first and broadcast.
    Returns the fold batches (`FOLD_SCHEMA`), persisted. With `stage` (a local directory), the
    tasks write the big row sets there as Parquet files themselves (`tasks.stage_files`) and
    return only the small rows. With `own_reads`, the tasks read head segments on the local file
    system themselves (`tasks.read_segment`), else Spark reads them."""
    sc = spark.sparkContext
    unit_meta = {u.unit: {"unit": u.unit, "journal": u.journal, "head_path": u.head_path, "uid": uids[u.unit],
                          "snapshot_seq": u.snapshot_seq, "lo": u.lo, "hi": u.hi, "index": u.index, "tail": u.tail}
                 for u in units}
    # a unit takes the records up to its tail (plan.py: the unconfirmed events before the next snapshot)
    units_df = spark.createDataFrame([(u.journal, u.unit, u.lo, min(u.tail, INF), u.head_path) for u in units],
                                     "journal STRING, unit INT, lo BIGINT, hi BIGINT, head_path STRING")
    heads_df = units_df.select(F.col("head_path").alias("path"), F.col("unit").alias("own_unit"))
    away = (lines.filter(F.col("ok") & ~F.col("torn") & (F.col("type") != "snapshot"))
            .withColumn("key", F.when(F.col("type") == "effects", F.col("event_seq")).otherwise(F.col("seq")))
            .alias("r").join(F.broadcast(units_df).alias("u"),
                             (F.col("r.journal") == F.col("u.journal")) & (F.col("r.key") > F.col("u.lo"))
                             & (F.col("r.key") <= F.col("u.hi")))
            .join(F.broadcast(heads_df), F.col("r.path") == heads_df.path, "left")
            .filter(F.col("own_unit").isNull() | (F.col("own_unit") != F.col("u.unit")))
            .select(F.col("r.path").alias("path"), F.col("r.line").alias("line"), F.col("u.unit").alias("unit"),
                    F.col("r.seq").alias("seq"), F.col("r.type").alias("type"), F.col("r.event_seq").alias("event_seq"))
            .collect())
    boundary: dict[int, list] = {}
    if away:
        wanted = spark.createDataFrame([(r["path"], r["line"], r["unit"], r["seq"], r["type"], r["event_seq"])
                                        for r in away],
                                       "path STRING, line INT, unit INT, seq BIGINT, type STRING, event_seq BIGINT")
        paths = sorted({r["path"] for r in away})
        texts = (_whole_files(spark, [_uri(p) for p in paths])
                 .select("path", F.posexplode(F.split("value", "\n", -1)).alias("pos", "text"))
                 .withColumn("line", (F.col("pos") + 1).cast("int"))
                 .join(F.broadcast(wanted), ["path", "line"])
                 .select("unit", "seq", "type", "path", "line", "text", "event_seq").collect())
        for r in texts:
            boundary.setdefault(r["unit"], []).append(tuple(r)[1:])
    b_units, b_display, b_boundary = sc.broadcast(unit_meta), sc.broadcast(display), sc.broadcast(boundary)
    unit_of_head = {u.head_path: u.unit for u in units}

    arrow_schema = _fold_arrow_schema(spark)
    direct = None
    if stage is not None:
        # the partition directories' names as Spark's writer spells them (escaped journal names,
        # its name for a null value), so that the staged files read back as the tables' own
        path_of = sc._jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils
        direct = {"root": stage, "tables": TABLE_OF,
                  "journals": {name: path_of.getPartitionPathString("journal", name) for name in display.values()},
                  "null": path_of.DEFAULT_PARTITION_NAME()}

    def fold_task(batches):
        from replay.tasks import fold_arrow

        return fold_arrow(batches, unit_of_head, b_units.value, b_display.value, b_boundary.value, arrow_schema,
                          direct)

    heads = sorted({u.head_path for u in units})
    if own_reads and all(_is_local(p) for p in heads):
        # On the local file system the tasks read their head segments themselves: Spark's
        # whole-text read decompressed each in the JVM, held its text on the heap and handed it
        # over, about 30 ms of a task more than Python's own read (80 segments of the
        # million-event journal, warm: 5.2 s against 3.9 s). And a task folds several units: a
        # Python task costs Spark about 70 ms besides its work here (one that only read its
        # segment took 97 ms, 24 of them in Python; a journal of 1,200 events in 33 units folded
        # in 4.2-4.7 s as 33 tasks, 2.6-3.0 s as 8).
        groups = _packed(heads, max(4 * sc.defaultParallelism, -(-len(heads) // UNITS_PER_TASK)))
        head_files = spark.createDataFrame(
            sc.parallelize(groups, len(groups)).flatMap(lambda paths: [(p,) for p in paths]), "path STRING")
        setting = contextlib.nullcontext()
    else:
        head_files = _whole_files(spark, [_uri(p) for p in heads]).select("path", "value")
        setting = _conf(spark, "spark.sql.files.openCostInBytes", str(1 << 40))  # one segment file per task
    with setting:
        folded = head_files.mapInArrow(fold_task, FOLD_SCHEMA).persist(StorageLevel.MEMORY_AND_DISK)
        folded.count()  # folds now (while one file per task holds)
    return folded


UNITS_PER_TASK = 8
"""About how many fold units one task folds when the tasks read their own segments (`_fold`):
enough to spread Spark's cost per task, few enough that the groups stay about equal."""


def _packed(paths: list[str], tasks: int) -> list[list[str]]:
    """`paths` in at most `tasks` groups of about equal size on disk (each next file, largest
    first, to the group holding least), the largest group first: one group is one task."""
    size = {p: _size(p) for p in paths}
    groups: list[list] = [[0, []] for _ in range(min(tasks, len(paths)))]
    for p in sorted(paths, key=lambda p: (-size[p], p)):
        least = min(groups, key=lambda g: g[0])
        least[0] += size[p]
        least[1].append(p)
    return [g[1] for g in sorted(groups, key=lambda g: -g[0])]


def _is_local(path: str) -> bool:
    """A segment named by a plain path (`_list_segments` names local files so): every task can
    open it as the driver does."""
    return "://" not in path and not path.startswith("file:")


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0  # (the task that reads it says what is wrong)


def _struct(schema: str) -> str:
    return "STRUCT<" + ", ".join(f.replace(" ", ": ", 1) for f in schema.split(", ")) + ">"


# what the fold tasks return (replay.tasks.fold_arrow): one typed struct column per big row set
FOLD_SCHEMA = ("kind STRING, unit STRING, date STRING, small STRING, " +
               ", ".join(f"{kind} {_struct(SCHEMAS[kind])}" for kind in ("timeline", "election", "event", "finding")))


def _fold_arrow_schema(spark: SparkSession):
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark.createDataFrame([], FOLD_SCHEMA).schema)


def unclean_not_allowed(elections: DataFrame) -> DataFrame:
    """`audit.check_elections` as a DataFrame operation (the rule is a row filter): findings."""
    no = F.lit(False)
    return elections.filter(
        F.coalesce(F.col("unclean"), no) & ~F.coalesce(F.col("unclean_allowed"), no)
        & ~F.coalesce(F.col("admin_requested"), no) & ~F.col("outcome").eqNullSafe("conflict")).select(
        F.lit("unclean-not-allowed").alias("rule"), F.lit("violation").alias("severity"), "journal", "file", "line",
        F.col("cause_seq").alias("seq"), "time", "topic", "partition",
        F.format_string("unclean election of leader %d (epoch %d) while the topic does not allow unclean leader "
                        "election", F.col("leader"), F.col("leader_epoch")).alias("detail"))


def _name_seq(path: str) -> int:
    import re

    return int(re.search(r"segment-(\d{20})\.jsonl", path).group(1))


def run(spark: SparkSession, journal: str | list[str], out: str, *, ship: bool = True, quiet: bool = False,
        report_dir: str | None = None, full: bool = False, closed_only: bool = False,
        on_findings=None, direct_io: bool = True) -> int:
    """Run the replay and audit of the journals under `journal` (one directory or several, of one
    cluster); write the tables under `out` and the report (report.html, the charts, summary.json)
    under `out` too, or under `report_dir` (a local directory; needed when `out` is not on the
    local file system); return the exit code (2: bad input, such as journals of two clusters).

    Incremental (replay/checkpoint.py): segments and fold units audited by an earlier run over the
    same `out` are not read or re-executed again; `full` starts from scratch. `closed_only` leaves
    out each journal's last segment (still being written) unless it was audited unchanged;
    `on_findings(rows)` receives every finding of the verdict (`kctl replay --follow`).

    When `out` is on the local file system (and `direct_io`), the fold tasks write the per-unit
    Parquet files of the four big tables themselves with pyarrow (`tasks.stage_files`) instead
    of handing their rows to Spark's writer: the rows never become JVM rows, are not cached, and
    are not scanned once per table. When the journals are (and `direct_io`), Python tasks read
    the segments themselves too (`tasks.read_segment`): to hash them, to check their lines
    (replay/scan.py) and to fold their units. Elsewhere (hdfs:// and the like) Spark reads and
    writes them; tests/replay/test_job.py holds both ways to the same rows and tables."""
    started = time.perf_counter()
    sc = spark.sparkContext
    try:
        root, files, on_disk = _list_segments(spark, journal)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if ship:
        package.ship(sc)
    if report_dir is None and "://" in out and not out.startswith("file:"):
        report_dir = "kctl-replay-report"
    out_dir = Path(report_dir) if report_dir is not None else Path(_norm(out))
    out_dir.mkdir(parents=True, exist_ok=True)
    # partition values ("2026-11-25", a unit id of hex digits) stay strings
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    # the segments are named one by one (a journal of a million events: 221 of them); above 32
    # paths Spark lists them with a job of one task per path each time the job reads them (four
    # jobs, 3.8 s in all on that journal), where the driver's own listing takes milliseconds
    spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", str(1 << 16))
    store = _Store(spark, out)
    try:
        manifest = checkpoint.Manifest() if full else checkpoint.Manifest.parse(store.read_text(checkpoint.PATH))
    except ValueError as exc:
        print(f"error: --out {out}: unreadable checkpoint ({exc}); use --full to audit from scratch", file=sys.stderr)
        return 2
    if manifest.empty:  # from scratch: no rows of an earlier run (or of an older table layout) stay
        for name in TABLES:
            store.delete(name)
        store.delete(checkpoint.PATH)
    store.prune_carry(manifest.audit, None)  # and no carry that a run stopped half way left
    store.delete(STAGING)  # nor the fold files of a run that stopped before moving them

    # 1. content hashes; what changed since the checkpoint ----------------------------------------
    listed = [(f, f.rsplit("/", 1)[0], _name_seq(f)) for f in files]
    display = {j: _display(root, j) for _, j, _ in listed}
    unchanged = manifest.unchanged_on_disk(listed, on_disk)
    hashed, unreadable = _hash(spark, listed, manifest.prefix_lengths(listed), unchanged, direct_io)
    status, _ = manifest.classify(hashed, display.get)
    if closed_only:
        still_open = {p for p, _, _ in listed} - checkpoint.closed(listed)
        hashed = [h for h in hashed if h.path not in still_open or status[h.path] == "known"]
        if not hashed:
            return 0
    marks = {"hash": time.perf_counter() - started}
    last_segment: dict[str, int] = {}
    for h in hashed:
        last_segment[h.journal] = max(last_segment.get(h.journal, -1), h.name_seq)
    for _, journal, name_seq in unreadable:
        last_segment[journal] = max(last_segment.get(journal, -1), name_seq)
    is_last = {h.path: h.name_seq == last_segment[h.journal] for h in hashed}
    rescan = [h for h in hashed if status[h.path] != "known"
              or manifest.segments[checkpoint.seg_key(h.journal, h.name_seq)]["last"] != is_last[h.path]]
    rescan_paths = {h.path for h in rescan}

    # 2. lines and their checks, of the segments not audited yet (executors) ---------------------
    lines = _lines_of(spark, sorted(rescan_paths), direct_io).persist(StorageLevel.MEMORY_AND_DISK) if rescan else None
    new_summaries, new_clusters, new_line_findings = (
        _scan(spark, lines, last_segment, display, sorted(rescan_paths)) if lines is not None else ({}, {}, {}))
    summaries, cluster_ids, line_findings = [], [], []
    for h in hashed:
        if h.path in rescan_paths:
            summaries.append(new_summaries[h.path])
            cluster_ids.append((h.journal, h.path, new_clusters[h.path]))
            line_findings += new_line_findings.get(h.path, [])
        else:
            summaries.append(manifest.summary_of(h))
            cluster_ids.append((h.journal, h.path, manifest.cluster_id(h)))
            line_findings += manifest.cached_line_findings(h, display.get)
    mixed = mixed_clusters(cluster_ids, display.get)
    if mixed is not None:
        if lines is not None:
            lines.unpersist()
        print(f"error: {mixed}", file=sys.stderr)
        return 2
    for h in rescan:
        manifest.record_segment(h, new_summaries[h.path], new_clusters[h.path], is_last[h.path],
                                new_line_findings.get(h.path, []))
    for h in hashed:
        seen = manifest.segments[checkpoint.seg_key(h.journal, h.name_seq)]
        seen["file"], seen["last"], seen["disk"] = h.path, is_last[h.path], on_disk[h.path]
    lost, lost_findings = _unreadable(unreadable, display.get)
    summaries += lost
    driver_findings = list(manifest.changes) + lost_findings + check_segments(summaries, display.get)
    units, plan_findings = plan_units(summaries, display.get)
    driver_findings += plan_findings
    keys = checkpoint.unit_keys(units, summaries, {**{h.path: h.sha for h in hashed},
                                                   **{p: "unreadable" for p, _, _ in unreadable}})
    uids = {n: checkpoint.unit_id(k) for n, k in keys.items()}
    execute = [u for u in units if keys[u.unit] not in manifest.units]
    marks["read, check and plan"] = time.perf_counter() - started - marks["hash"]

    # 3. re-execute the units not audited yet (executors) -----------------------------------------
    fold_started = time.perf_counter()
    folded = None
    local_out = store.local_dir if direct_io else None
    stage = f"{local_out}/{STAGING}/{int(time.time() * 1000)}" if local_out is not None and execute else None
    if execute:
        extra = sorted(checkpoint.reads_of(execute, units, summaries) - rescan_paths - {p for p, _, _ in unreadable})
        source = lines if not extra else (_lines_of(spark, extra, direct_io) if lines is None
                                          else lines.unionByName(_lines_of(spark, extra, direct_io)))
        folded = _fold(spark, source, execute, display, uids, stage, own_reads=direct_io)
        small_kinds = ("unit", "term", "broker", "reassign", "decision", "outcome")
        fresh: dict[str, dict] = {uids[u.unit]: {k: [] for k in small_kinds} for u in execute}
        for r in folded.filter(F.col("kind").isin(*small_kinds)).select("kind", "small", "unit").collect():
            fresh[r[2]][r[0]].append(json.loads(r[1]))
        for u in execute:
            uid = uids[u.unit]
            starts = [s["first_at"] for s in fresh[uid]["unit"] if s.get("first_at") is not None]
            starts += [s["first_row_at"] for s in fresh[uid]["unit"] if s.get("first_row_at") is not None]
            manifest.units[keys[u.unit]] = {"uid": uid, "journal": u.journal, "snapshot_seq": u.snapshot_seq,
                                            "small": fresh[uid], "min_time": min(starts) if starts else None}
    live = {keys[u.unit] for u in units}
    changed_starts = [manifest.units[keys[u.unit]].get("min_time") for u in execute]
    for key in [k for k in manifest.units if k not in live]:
        changed_starts.append(manifest.units[key].get("min_time"))
        del manifest.units[key]  # superseded: its journal grew past it, or its segments changed
    small = {k: [] for k in ("unit", "term", "broker", "reassign", "decision", "outcome")}
    for u in units:
        for kind, rows in manifest.units[keys[u.unit]]["small"].items():
            small[kind] += rows
    marks["fold"] = time.perf_counter() - fold_started
    rest_started = time.perf_counter()

    # 4. per-unit rows into the tables; cross-unit history (driver) --------------------------------
    executed_uids = {uids[u.unit] for u in execute}
    store.drop_units({uids[u.unit] for u in units} - executed_uids)  # also every unit=cluster directory
    for name in PARTITIONED:
        store.mkdirs(name)
    if stage is not None:
        _unstage(stage, local_out)

    def unit_rows(kind: str, schema: str) -> DataFrame:
        return folded.filter(F.col("kind") == kind).select(f"{kind}.*", "unit", "date")

    def append(df: DataFrame, name: str) -> None:
        df.write.mode("append").partitionBy("journal", "date", "unit").parquet(f"{out}/{name}")

    def cluster_rows(df: DataFrame) -> DataFrame:
        return (df.withColumn("date", F.date_format(F.from_unixtime(F.col("time") / 1000), "yyyy-MM-dd"))
                .withColumn("unit", F.lit(checkpoint.CLUSTER_UNIT)))

    def read(name: str, schema: str) -> DataFrame:
        return spark.read.schema(f"{schema}, date STRING, unit STRING").parquet(f"{out}/{name}")

    cluster = history.assemble(small["unit"], small["term"], small["broker"], small["reassign"], small["decision"],
                               small["outcome"])
    driver_findings += cluster["findings"]

    def local_rows(rows: list[dict], schema: str) -> DataFrame:
        return spark.createDataFrame([(json.dumps(r),) for r in rows], "payload STRING") \
            .select(F.from_json("payload", schema).alias("x")).select("x.*")

    per_table = {"partition_timeline": [cluster_rows(local_rows(cluster["timeline"], SCHEMAS["timeline"]))],
                 "elections": [cluster_rows(local_rows(cluster["elections"], SCHEMAS["election"]))]}
    if folded is not None and stage is None:
        for kind, name in TABLE_OF.items():
            per_table.setdefault(name, []).append(unit_rows(kind, SCHEMAS[kind]))
    # one write per table (two appends into one directory at once would share its _temporary)
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="replay-write") as pool:
        for done in [pool.submit(append, functools.reduce(DataFrame.unionByName, dfs), name)
                     for name, dfs in per_table.items()]:
            done.result()
    if folded is not None:
        folded.unpersist()
    if lines is not None:
        lines.unpersist()
    # where the last stage's time goes, in three parts (summary.json, `stage_parts`)
    parts = {"cluster history and tables written": time.perf_counter() - rest_started}
    timeline = read("partition_timeline", SCHEMAS["timeline"]).drop("date", "unit")
    elections = read("elections", SCHEMAS["election"]).drop("date", "unit")
    events = read("events", SCHEMAS["event"]).drop("date", "unit")

    # 5. the audit of every partition (executors): a walk of its timeline in Python over Arrow
    #    batches (audit.PartitionWalk: the rules and the measurements, and the state kept at this
    #    run's cut), from the last run's carry where it holds (replay/carry.py), else over the
    #    whole timeline
    t0, width, end = cluster["start"], cluster["bucket_ms"], cluster["end"]
    intervals, failures, loads = cluster["broker_intervals"], cluster["failures"], cluster["loads"]
    last_units: dict[str, Unit] = {}
    for u in units:
        if u.journal not in last_units or u.index > last_units[u.journal].index:
            last_units[u.journal] = u
    new_cut = carry.cut_of([manifest.units[keys[u.unit]].get("min_time") for u in last_units.values()])
    old = manifest.audit
    why_whole = carry.unusable(old, carry.guard(old["cut"], intervals, failures, cluster["timeline"], loads)
                               if old else None, changed_starts)
    if why_whole is None and (new_cut is None or new_cut < old["cut"]):
        why_whole = "this run's cut is not after the last one's"
    run_dir = f"{carry.DIR}/{int(time.time() * 1000)}"
    b_walk = sc.broadcast((intervals, failures, end, loads))

    def walk(df: DataFrame, cut: int | None) -> DataFrame:
        def walk_task(batches):
            from replay.tasks import walk_arrow

            iv, fs, end_time, term_loads = b_walk.value
            return walk_arrow(batches, iv, fs, end_time, cut, term_loads)

        return (df.repartition(max(2, sc.defaultParallelism * 2), "topic", "partition")
                .sortWithinPartitions("topic", "partition")
                .mapInArrow(walk_task, WALK_SCHEMA).persist(StorageLevel.MEMORY_AND_DISK))

    def small_rows(walked: DataFrame) -> list:  # runs the walk
        return walked.filter(F.col("kind").isin("offline", "recovery", "whole")) \
            .select("kind", "payload", "t", "b", "final").collect()

    audit_started = time.perf_counter()
    walked = None
    if why_whole is None:  # the rows at or after the last cut, each partition's carried state with them
        states = spark.read.schema(CARRY_SCHEMAS["state"]).parquet(f"{out}/{old['dir']}/state")
        tail = timeline.filter(F.col("time") >= F.lit(old["cut"])).select(*WALKED)
        walked = walk(tail.unionByName(states, allowMissingColumns=True), new_cut)
        walked_small = small_rows(walked)
        stale = [json.loads(r["payload"]) for r in walked_small if r["kind"] == "whole"]
        if stale:
            why_whole = (f"{len(stale)} partition(s) read an older znode version after the last run's cut "
                         f"(first: {stale[0]['topic']}-{stale[0]['partition']})")
            walked.unpersist()
            walked = None
    if walked is None:
        walked = walk(timeline.select(*WALKED), new_cut)
        walked_small = small_rows(walked)
    rule_findings = walked.filter(F.col("kind") == "finding") \
        .select(F.from_json("payload", SCHEMAS["finding"]).alias("x")).select("x.*")
    if why_whole is None:
        rule_findings = rule_findings.unionByName(
            spark.read.schema(SCHEMAS["finding"]).parquet(f"{out}/{old['dir']}/findings"))
    rule_findings = rule_findings.persist(StorageLevel.MEMORY_AND_DISK)  # the findings table and the carry
    parts["audit per partition"] = time.perf_counter() - audit_started
    resumed = why_whole is None
    slices = (old["slices"] if resumed else []) + ([run_dir] if new_cut is not None else [])
    deltas = walked.filter(F.col("kind") == "delta").select("t", "b", "d")
    recoveries = [(r["b"], r["t"]) for r in walked_small if r["kind"] == "recovery"]
    if resumed:
        for d in old["slices"]:
            deltas = deltas.unionByName(spark.read.schema(CARRY_SCHEMAS["deltas"]).parquet(f"{out}/{d}/deltas"))
            recoveries += [(r["failure"], r["ms"]) for r in
                           spark.read.schema(CARRY_SCHEMAS["recoveries"]).parquet(f"{out}/{d}/recoveries").collect()]

    election_findings = unclean_not_allowed(elections)
    whole = (rule_findings
             .unionByName(election_findings)
             .unionByName(local_rows(line_findings + driver_findings, SCHEMAS["finding"])))
    offline = walked.filter(F.col("kind") == "offline").select(F.from_json("payload", SCHEMAS["offline"]).alias("x")) \
        .select("x.*")

    # 6. tables, measurements, report ------------------------------------------------------------
    from replay import audit

    offline_ms = [json.loads(r["payload"])["offline_ms"] for r in walked_small if r["kind"] == "offline"]
    failure_rows, recovery_summary = audit.recovery_stats(recoveries, failures)
    small_tables = {"broker_intervals": intervals, "controller_terms": cluster["terms"],
                    "reassignments": cluster["reassignments"], "broker_failures": failure_rows}
    writes = {"partition_offline": offline}
    writes.update({name: local_rows(rows, SCHEMAS[name]).coalesce(1) for name, rows in small_tables.items()})
    if new_cut is not None:  # what the next run carries over
        writes[f"{run_dir}/state"] = walked.filter(F.col("kind") == "state").select(
            F.get_json_object("payload", "$.topic").alias("topic"),
            F.get_json_object("payload", "$.partition").cast("int").alias("partition"),
            F.get_json_object("payload", "$.state").alias("carry"))
        writes[f"{run_dir}/findings"] = rule_findings.filter(F.col("time") < F.lit(new_cut))
        writes[f"{run_dir}/deltas"] = walked.filter((F.col("kind") == "delta") & F.col("final")).select("t", "b", "d")
        writes[f"{run_dir}/recoveries"] = walked.filter((F.col("kind") == "recovery") & F.col("final")).select(
            F.col("b").alias("failure"), F.col("t").alias("ms"))

    def write(name_df):
        name_df[1].write.mode("overwrite").parquet(f"{out}/{name_df[0]}")

    def finding_summary():
        append(cluster_rows(whole).coalesce(max(1, sc.defaultParallelism)), "findings")
        findings = read("findings", SCHEMAS["finding"]).drop("date", "unit")
        counts_rows = findings.groupBy("severity", "rule").count().collect()
        sample = [r.asDict() for r in findings.orderBy(
            F.when(F.col("severity") == "violation", 0).when(F.col("severity") == "warning", 1).otherwise(2),
            "journal", "seq", "file", "line").limit(report.SAMPLE).collect()]
        every = [r.asDict() for r in findings.collect()] if on_findings is not None else None
        return counts_rows, sample, every

    # independent Spark jobs, submitted together: on a small cluster their latency dominates
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="replay-write") as pool:
        pending_findings = pool.submit(finding_summary)
        pending_series = pool.submit(_series, deltas, events, t0, width, cluster["buckets"])
        pending_live = pool.submit(_live_times, events)
        for done in [pool.submit(write, item) for item in writes.items()]:
            done.result()
        counts_rows, sample, every = pending_findings.result()
        series = pending_series.result()
        live_times = pending_live.result()
    counts = sorted(((r[0], r[1], r[2]) for r in counts_rows),
                    key=lambda x: (history.SEVERITIES.index(x[0]) if x[0] in history.SEVERITIES else 9, x[1]))
    unit_summaries = small["unit"]
    executed = {uids[u.unit] for u in execute}
    run_units = [s for u in execute for s in manifest.units[keys[u.unit]]["small"]["unit"]]
    stats = {"events": sum(u["events"] for u in unit_summaries), "journals": len(display), "segments": len(summaries),
             "units": len(units), "step_seconds": sum(u["step_seconds"] for u in unit_summaries),
             "fold_seconds": sum(u.get("fold_seconds", 0) for u in unit_summaries),
             # the fold tasks end to end: their lines checked and parsed, the fold, the rows written
             "task_seconds": sum(u.get("parse_seconds", 0) + u.get("fold_seconds", 0) + u.get("write_seconds", 0)
                                 for u in unit_summaries),
             "incremental": {"audit": "resumed at the last run's cut" if resumed else f"whole timeline: {why_whole}",
                             "segments_hashed": len(listed) - len(unchanged), "segments_read": len(rescan),
                             "segments_reused": len(hashed) - len(rescan),
                             "units_executed": len(executed), "units_reused": len(units) - len(executed),
                             "events_executed": sum(u["events"] for u in run_units),
                             "step_seconds_executed": sum(u["step_seconds"] for u in run_units)},
             "wall_seconds": time.perf_counter() - started, "stage_seconds": marks, "stage_parts": parts,
             "offline_ms_per_partition": audit.summary(offline_ms), "recovery_ms_per_failure": recovery_summary,
             **live_times}
    passed = not any(s == "violation" and n for s, _, n in counts)
    manifest.runs.append({"at": int(time.time() * 1000), "segments": len(hashed), "segments_read": len(rescan),
                          "units": len(units), "units_executed": len(executed), "passed": passed})
    before = manifest.audit
    manifest.audit = None if new_cut is None else {
        "cut": new_cut, "dir": run_dir, "slices": slices, "resumed": resumed,
        "guard": carry.guard(new_cut, intervals, failures, cluster["timeline"], loads)}
    store.write_text(checkpoint.PATH, manifest.dumps())
    store.prune_carry(manifest.audit, before)
    report.write_report(out_dir, stats=stats, counts=counts, sample=sample, series=series, terms=cluster["terms"],
                        failures=failure_rows, passed=passed, tables=TABLES,
                        shutdowns=[iv for iv in cluster["broker_intervals"] if iv["reason"] == "controlled shutdown"])
    marks["audit, tables and report"] = time.perf_counter() - rest_started
    parts["rules, findings, measurements and report"] = (marks["audit, tables and report"]
                                                         - parts["cluster history and tables written"]
                                                         - parts["audit per partition"])
    stats["wall_seconds"] = time.perf_counter() - started
    (out_dir / "summary.json").write_text(json.dumps({"passed": passed, "stats": stats, "counts": counts,
                                                      "series": series}, indent=2))
    if not quiet:
        print(report.summary_text(stats, counts, passed, sample))
    if on_findings is not None:
        on_findings(every)
    walked.unpersist()
    rule_findings.unpersist()
    return 0 if passed else 1


def _series(deltas: DataFrame, events: DataFrame, t0: int, width: int, buckets: list[int]) -> dict:
    """The charts' series: offline partitions and leaders per broker (from the walks' deltas: a
    broker of -1 counts offline partitions) and events with their replay times, per bucket."""
    n = len(buckets)

    def bucket(col: str):
        return F.greatest(F.lit(0), F.least(F.lit(n - 1), F.ceil((F.col(col) - F.lit(t0)) / F.lit(width)) - 1))

    offline: dict[int, int] = {}
    leaders: dict[int, dict[int, int]] = {}
    for k, b, d in deltas.groupBy(bucket("t").alias("k"), "b").agg(F.sum("d").alias("d")).collect():
        if b < 0:
            offline[k] = offline.get(k, 0) + d
        else:
            per = leaders.setdefault(b, {})
            per[k] = per.get(k, 0) + d
    per_bucket = (events.select(bucket("time").alias("k"), "replay_us", "live_process_us")
                  .groupBy("k").agg(F.count("*").alias("n"),
                                    F.percentile_approx("replay_us", 0.5).alias("p50"),
                                    F.percentile_approx("replay_us", 0.99).alias("p99"),
                                    # (nulls, events of journals older than the live times, are left out)
                                    F.percentile_approx("live_process_us", 0.5).alias("live_p50"),
                                    F.percentile_approx("live_process_us", 0.99).alias("live_p99")).collect())
    by_k = {r["k"]: r for r in per_bucket}
    return {"buckets": buckets, "bucket_ms": width, "offline": history.cumulative(offline),
            "leaders": {b: history.cumulative(v) for b, v in sorted(leaders.items())},
            "events": [by_k[k]["n"] if k in by_k else 0 for k in range(n)],
            "replay_us_p50": [by_k[k]["p50"] if k in by_k else None for k in range(n)],
            "replay_us_p99": [by_k[k]["p99"] if k in by_k else None for k in range(n)],
            "live_process_us_p50": [by_k[k]["live_p50"] if k in by_k else None for k in range(n)],
            "live_process_us_p99": [by_k[k]["live_p99"] if k in by_k else None for k in range(n)]}


def _live_times(events: DataFrame) -> dict:
    """`audit.live_times` over the events table, with Spark's approximate percentiles."""
    def summary(col) -> list:
        return [F.count(col), F.percentile_approx(col, 0.5), F.percentile_approx(col, 0.99), F.max(col)]

    row = events.agg(*summary(F.col("live_process_us") / 1000), *summary(F.col("queue_ms"))).collect()[0]
    keys = ("count", "median", "p99", "max")
    return {"process_ms_per_event": dict(zip(keys, row[0:4])), "queue_ms_per_event": dict(zip(keys, row[4:8]))}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="replay/job.py", description="Replay and audit controller journals on Spark.")
    p.add_argument("--journal", required=True, nargs="+", action="extend",
                   help="directories holding the journals of one cluster (searched recursively)")
    p.add_argument("--out", required=True, help="directory for the Parquet tables and the report")
    p.add_argument("--report", default=None,
                   help="local directory for report.html and summary.json (default: --out when it is local, "
                        "else ./kctl-replay-report)")
    p.add_argument("--hash-seed", default="0",
                   help="PYTHONHASHSEED for the executors' Python workers (default 0; see README, Known core issues)")
    return p


def session(master: str | None = None, app: str = "kctl-replay", hash_seed: str = "0", conf: dict | None = None):
    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    if not os.environ.get("PYSPARK_PYTHON") and (master or "local").startswith("local"):
        # PySpark starts its workers with $PYSPARK_PYTHON, else `python3` from PATH (the
        # spark.pyspark.python setting only reaches spark-submit): run them on this interpreter
        # and its packages (immutables' C extension among them)
        os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = builder.config("spark.executorEnv.PYTHONHASHSEED", hash_seed).config("spark.ui.showConsoleProgress", "false")
    if (master or "local").startswith("local"):
        # a local run stays on loopback: without this Spark binds to whatever the hostname
        # resolves to, which on some machines is a non-loopback interface
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.ui.enabled", "false"))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    spark = session(hash_seed=args.hash_seed)
    try:
        return run(spark, args.journal, args.out, report_dir=args.report)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
