"""The fold (plain Python): a generated cluster life re-executes to the same decisions and the
same final states, and the history rows say what happened."""
from __future__ import annotations

import json

from controller_core import codec
from controller_core.state import initial_state
from replay import digest as fast_digest
from replay import history, local
from adapters.journal.format import find_journals, read_journal


def violations(result):
    return [f for f in result.findings if f["severity"] == "violation"]


def test_generated_life_replays_without_violations(replayed):
    assert violations(replayed) == []
    assert replayed.passed
    assert replayed.stats["events"] >= 6000
    rules = {f["rule"] for f in replayed.findings}
    assert rules <= {"process-restart", "no-effects", "torn-tail"}


def test_fold_ends_in_the_live_final_states(generated, replayed):
    _, world = generated
    compared = 0
    for node in world.nodes.values():
        name = f"node-{node.id}"
        if not node.running_at_close:  # a crashed node may have died mid-batch: nothing to compare
            continue
        if node.state == initial_state(node.config):
            continue  # restarted and journaled nothing since: the journal cannot know

        assert replayed.states[name] == node.state, name
        compared += 1
    assert compared >= 1


def test_every_event_and_effects_record_is_accounted_for(generated, replayed):
    root, _ = generated
    events = sum(1 for j in find_journals(root) for r in read_journal(j) if r["type"] == "event")
    assert len(replayed.tables["events"]) == events
    checked = [e for e in replayed.tables["events"] if e["digest_ok"] is not None]
    assert len(checked) >= events - 10 and all(e["digest_ok"] for e in checked)


def test_units_cover_the_loop_batches_and_restarts(replayed):
    units = replayed.units
    assert len(units) > 20
    assert sum(1 for u in units if u["last"]) == 3
    # a process restart that reopened a plain segment is seen inside a unit, and one that
    # rolled is seen at a unit boundary (the next snapshot is a fresh state)
    restarts = [f for f in replayed.findings if f["rule"] == "process-restart"]
    assert restarts
    # mid-batch rolls: some unit starts with a cut below its snapshot (events carried in)
    assert any(u["snapshot_seq"] - 1 > 0 for u in units)


def test_fast_digests_equal_the_reference_on_every_decision(generated, monkeypatch):
    """The replay's digest (orjson) and the core's (`codec.digest`, what the loop journals) both
    equal the definition, `codec.reference_digest`, on every decision the fold re-executes."""
    root, _ = generated
    seen = []
    real = fast_digest.digest
    assert real is not codec.digest and codec.digest is not codec.reference_digest

    def both(commands):
        d = real(commands)
        assert d == codec.reference_digest(commands)
        assert codec.digest(commands) == d
        seen.append(len(commands))
        return d

    monkeypatch.setattr(fast_digest, "digest", both)
    result = local.replay(root)
    assert not violations(result)
    assert len(seen) >= 6000 and max(seen) > 10


def test_history_tables(replayed):
    t = replayed.tables
    kinds = {r["kind"] for r in t["partition_timeline"]}
    assert {"write", "observed", "elected"} <= kinds
    writes = [r for r in t["partition_timeline"] if r["kind"] == "write"]
    assert all(r["cause_type"] and r["cause_seq"] < r["seq"] for r in writes)
    terms = t["controller_terms"]
    epochs = [x["epoch"] for x in terms]
    assert epochs == sorted(epochs) and len(set(epochs)) == len(epochs) >= 3
    assert {e["kind"] for e in t["elections"]} >= {"initial", "clean", "preferred"}
    assert any(r["outcome"] == "completed" and r["duration_ms"] is not None for r in t["reassignments"])
    assert any(iv["state"] == "down" for iv in t["broker_intervals"])
    assert t["broker_failures"] and all("recovery_ms" in f for f in t["broker_failures"])
    assert len(replayed.series["offline"]) == history.BUCKETS


def test_report_is_written(generated, tmp_path):
    root, _ = generated
    result = local.replay(root)
    from replay import report

    counts = history.by_rule(result.findings)
    page = report.write_report(tmp_path / "report", stats=result.stats, counts=counts, sample=result.findings,
                               series=result.series, terms=result.tables["controller_terms"],
                               failures=result.tables["broker_failures"], passed=result.passed)
    html = page.read_text()
    assert "PASS" in html
    for png in ("offline_partitions.png", "leaders_per_broker.png", "event_rate.png", "processing_time.png"):
        assert (tmp_path / "report" / png).stat().st_size > 5000
    assert "verdict: PASS" in report.summary_text(result.stats, counts, result.passed)
    json.dumps(result.stats)  # the summary is JSON-able


def test_broker_history_ends_with_the_brokers_the_last_controller_knows(generated, replayed):
    """A BrokersChanged that waited behind a write or a re-read is decided in the step of the
    event that ended the wait; the broker history records it all the same."""
    _, world = generated
    final = replayed.states[f"node-{world.controller}"]
    assert final.active
    still_up = {iv["broker"] for iv in replayed.tables["broker_intervals"] if iv["end"] is None and iv["state"] == "up"}
    assert still_up == set(final.brokers.keys())


def test_a_head_segment_read_by_its_task_folds_as_the_text_spark_hands_over(generated):
    """The Spark job's fold tasks read local head segments themselves, as bytes
    (`tasks.read_segment`), and otherwise get the text Spark read: both fold to the same rows,
    for closed (.gz) and open segments alike, and a line whose byte was flipped is left to the
    line checks in both."""
    import shutil

    from replay import tasks
    from replay.plan import plan_units

    root = generated[0]
    summaries = local.scan([root])[0]
    units = plan_units(summaries)[0]
    heads = ([u for u in units if u.head_path.endswith(".gz")][:2]
             + [u for u in units if u.head_path.endswith(".jsonl")][:1])
    assert len(heads) == 3
    meta = {u.unit: {**u._asdict(), "uid": f"u{u.unit}"} for u in heads}
    display = {u.journal: u.journal for u in heads}
    flipped = heads[-1].head_path + ".flipped"
    shutil.copy(heads[-1].head_path, flipped)
    data = bytearray(open(flipped, "rb").read())
    third = data.index(b"\n", data.index(b"\n") + 1) + 40
    data[third] ^= 0x01  # (a digit or letter of the third line: still valid UTF-8)
    open(flipped, "wb").write(bytes(data))
    meta[heads[-1].unit] = {**meta[heads[-1].unit], "head_path": flipped}

    def folded(read):
        paths = [u.head_path for u in heads[:-1]] + [flipped]
        of_head = dict(zip(paths, (u.unit for u in heads)))
        rows = []
        for kind, kind_rows, uid, day in tasks.fold_files(((p, read(p)) for p in paths), of_head, meta, display, {}):
            assert kind_rows
            for row in kind_rows:
                row = {k: v for k, v in row.items() if not k.endswith("_seconds") and k != "replay_us"}
                rows.append((kind, json.dumps(row, sort_keys=True, default=str), uid, day))
        return rows

    as_bytes = folded(tasks.read_segment)
    as_text = folded(lambda p: tasks.read_segment(p).decode())
    assert as_bytes == as_text
    kinds = [k for k, *_ in as_bytes]
    assert kinds.count("unit") == 3 and "timeline" in kinds and "event" in kinds
    assert tasks.read_segment(heads[0].head_path).startswith(b'{"crc":')
