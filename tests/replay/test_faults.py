"""Planted faults are caught (plain-Python replay; tests/replay/test_job.py does the same on Spark)."""
from __future__ import annotations

import pytest

import json

from adapters.journal.writer import encode_record
from replay import history, local, report
from adapters.journal.format import list_segments

from .helpers import copy_tree, flip_byte, read_lines, records, rewrite, write_lines


def found(result, rule):
    return [f for f in result.findings if f["rule"] == rule]


def test_flipped_byte_is_reported_with_file_and_line(generated, tmp_path):
    root = copy_tree(generated[0], tmp_path / "j")
    seg = list_segments(root / "node-1")[2].path
    flip_byte(seg, line=4)
    result = local.replay(root)
    bad = found(result, "corrupt-record")
    assert [(f["file"], f["line"], f["severity"]) for f in bad] == [(str(seg), 4, "violation")]
    assert "checksum mismatch" in bad[0]["detail"]
    assert not result.passed
    text = report.summary_text(result.stats, history.by_rule(result.findings), result.passed, result.findings)
    assert f"  corrupt-record: node-1/{seg.name}:4: checksum mismatch" in text


@pytest.mark.slow  # a Spark job each: `make test-slow` runs them
def test_missing_segment_is_a_gap(generated, tmp_path):
    root = copy_tree(generated[0], tmp_path / "j")
    segs = list_segments(root / "node-2")
    gone = segs[len(segs) // 2]
    following = segs[len(segs) // 2 + 1]
    gone.path.unlink()
    result = local.replay(root)
    gap = found(result, "missing-records")
    assert len(gap) == 1 and gap[0]["journal"] == "node-2" and gap[0]["seq"] == gone.first_seq
    assert gap[0]["file"] == str(following.path) and f"{gone.first_seq}..{following.first_seq - 1}" in gap[0]["detail"]
    assert not result.passed


@pytest.mark.slow  # a Spark job each: `make test-slow` runs them
def test_duplicated_epoch(generated, tmp_path):
    root = copy_tree(generated[0], tmp_path / "j")
    elected = {}
    for name in ("node-1", "node-2", "node-3"):
        for path, line, rec in records(root / name):
            if rec["type"] == "event" and rec["body"]["type"] == "ControllerElected":
                elected.setdefault(name, []).append((path, line, rec))
    (a, first), (b, second) = [(k, v[0]) for k, v in sorted(elected.items())[:2]]
    epoch = first[2]["body"]["epoch"]
    path, line, rec = second
    rec["body"]["epoch"] = epoch
    rec["controller_epoch"] = epoch
    rewrite(path, line, rec)
    result = local.replay(root)
    dup = found(result, "duplicate-epoch")
    assert dup and f"epoch {epoch} was held 2 times" in dup[0]["detail"]


def _plant_observation(root, replayed, change):
    """Append to the active controller's journal an ISR-change notification whose content is
    `change(leader, epoch, isr, controller_epoch)`, at the next znode version of a partition."""
    name, state = max(((n, st) for n, st in replayed.states.items() if st.active), key=lambda x: x[1].epoch)
    tp, info = next((tp, info) for tp, info in sorted(state.partitions.items())
                    if info.leader_isr is not None and info.leader_isr.leader_epoch >= 1
                    and len(info.assignment.replicas) >= 2)
    li = info.leader_isr
    leader, epoch, isr, cepoch = change(li.leader, li.leader_epoch, list(li.isr), li.controller_epoch,
                                        list(info.assignment.replicas))
    last = list_segments(root / name)[-1].path
    lines = read_lines(last)
    tail = json.loads(lines[-1])
    seq, at = tail["seq"] + 1, tail["at"] + 1
    body = {"type": "PartitionStatesObserved", "v": 1, "at": at, "source": "isr_change",
            "states": [[[tp.topic, tp.partition], [leader, epoch, isr, cepoch, li.zk_version + 1]]]}
    lines.append(encode_record(seq, tail["controller_id"], tail["controller_epoch"], at, "event", 1, body)[:-1])
    write_lines(last, lines)
    return name, tp, seq, last, len(lines)


def test_leader_outside_the_isr_names_journal_file_line_and_seq(generated, replayed, tmp_path):
    root = copy_tree(generated[0], tmp_path / "j")
    name, tp, seq, path, line = _plant_observation(root, replayed, lambda leader, epoch, isr, ce, replicas: (
        replicas[0], epoch, replicas[1:2], ce))
    result = local.replay(root)
    bad = found(result, "leader-not-in-isr")
    assert [(f["journal"], f["file"], f["line"], f["seq"], f["topic"], f["partition"]) for f in bad] == \
        [(name, str(path), line, seq, tp.topic, tp.partition)]
    assert not result.passed
    text = report.summary_text(result.stats, history.by_rule(result.findings), result.passed, result.findings)
    assert f"  leader-not-in-isr: {name}/{path.name}:{line} seq {seq}: " in text


def test_the_summary_lists_the_first_twenty_violations_then_a_count():
    sample = [{"severity": "violation", "rule": "corrupt-record", "journal": "node-1", "seq": None, "line": k,
               "file": "/j/node-1/segment-00000000000000000001.jsonl", "detail": "checksum mismatch"}
              for k in range(1, 31)]
    text = report.summary_text({}, [("violation", "corrupt-record", 30)], False, sample)
    listed = [ln for ln in text.splitlines() if ln.startswith("  corrupt-record: ")]
    assert len(listed) == 20
    assert listed[0] == "  corrupt-record: node-1/segment-00000000000000000001.jsonl:1: checksum mismatch"
    assert "... and 10 more violation(s)" in text


@pytest.mark.slow  # a Spark job each: `make test-slow` runs them
def test_leader_epoch_going_back(generated, replayed, tmp_path):
    root = copy_tree(generated[0], tmp_path / "j")
    name, tp, seq, _, _ = _plant_observation(root, replayed, lambda leader, epoch, isr, ce, replicas: (
        leader, epoch - 1, isr, ce))
    result = local.replay(root)
    bad = found(result, "leader-epoch")
    assert [(f["journal"], f["seq"], f["topic"], f["partition"]) for f in bad] == [(name, seq, tp.topic, tp.partition)]
    assert "went back" in bad[0]["detail"]


def _last_segment(root):
    journals = sorted((len(list_segments(d)), d.name) for d in root.iterdir() if d.is_dir())
    return list_segments(root / journals[-1][1])[-1].path


@pytest.mark.slow  # a Spark job each: `make test-slow` runs them
def test_a_flipped_bit_in_the_last_line_is_corruption_not_a_torn_tail(generated, tmp_path):
    root = copy_tree(generated[0], tmp_path / "j")
    seg = _last_segment(root)
    lines = read_lines(seg)
    flip_byte(seg, line=len(lines))  # a complete line: it may have been fsynced, so it is damage
    result = local.replay(root)
    bad = found(result, "corrupt-record")
    assert [(f["file"], f["line"], f["severity"]) for f in bad] == [(str(seg), len(lines), "violation")]
    assert not found(result, "torn-tail") and not result.passed


def test_a_last_line_with_nul_bytes_is_a_torn_tail(generated, tmp_path):
    root = copy_tree(generated[0], tmp_path / "j")
    seg = _last_segment(root)
    lines = read_lines(seg)
    lines[-1] = lines[-1][:-20] + b"\0" * 20  # space a crash left allocated but unwritten
    write_lines(seg, lines)
    result = local.replay(root)
    assert [(f["line"], f["severity"]) for f in found(result, "torn-tail")] == [(len(lines), "warning")]
    assert not found(result, "corrupt-record")
