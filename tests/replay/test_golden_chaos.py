"""The journals of a chaos soak recorded by an earlier core re-execute through today's core to
the same decisions.

`golden/chaos-60s-seed3/` holds the journal segments of
`python -m adapters.cli chaos --duration 60 --seed 3 --partitions 200 --nodes 3 --replay local --out DIR`
run at commit 7b454c1, before the columnar partition image (issue 17), with every segment
gzip-compressed afterwards to keep the fixture small (the reader treats a `.gz` segment as
closed; nothing else changes). Unlike the generated life of test_golden_life.py, these were
written by real `kctl node` processes under SIGKILL, SIGSTOP, session expiry and ZooKeeper
restarts: controller terms cut short, writes fenced, events deferred and re-checked.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.replay.test_golden_life import replay_in_a_subprocess

GOLDEN = Path(__file__).parent / "golden" / "chaos-60s-seed3"


@pytest.fixture(scope="module")
def chaos_replay():
    return replay_in_a_subprocess(GOLDEN)


def test_the_chaos_journals_are_all_there():
    segments = sorted(p.name for p in GOLDEN.glob("node-*/segment-*.jsonl.gz"))
    assert len(segments) == 9


def test_every_decision_of_the_chaos_soak_re_executes_to_the_recorded_digest(chaos_replay):
    # 167: since 2026-12-06 also the five events that killed processes had journaled without an
    # effects record and that a restart's snapshot follows (re-executed in the dead process's
    # unit, unchecked: replay/plan.py); 162 before
    assert chaos_replay["events"] == 167
    assert chaos_replay["checked"] == 155  # the rest were cut off by a kill before their effects
    assert chaos_replay["mismatched"] == 0


def test_the_chaos_soak_has_no_re_execution_or_snapshot_findings(chaos_replay):
    rules = {f["rule"] for f in chaos_replay["findings"]}
    assert not rules & {"re-execution", "snapshot-mismatch", "undecodable-record"}, chaos_replay["findings"][:5]
    assert [f for f in chaos_replay["findings"] if f["severity"] == "violation"] == []
    assert rules <= {"process-restart", "no-effects"}
    assert chaos_replay["passed"]
