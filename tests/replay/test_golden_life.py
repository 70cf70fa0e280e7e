"""Journals recorded by an earlier core re-execute through today's core to the same decisions.

`golden/life-2000p-seed11/` was written before the columnar partition image (issue 17) by
`python -m replay.generate --out DIR --events 20000 --partitions 2000 --seed 11` at commit
2a98eef, with the two plain last segments gzip-compressed afterwards to keep the fixture small
(the reader treats a `.gz` segment as closed; nothing else changes). Every effects record holds
the digest of the commands that core decided, so a changed decision, a changed command content
or an unreadable old record shows up as a finding here.

The replay runs in a subprocess with PYTHONHASHSEED=0, the seed the generator pins (as
`python -m replay.local` does).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden" / "life-2000p-seed11"

_SCRIPT = """
import json, sys
from replay import local
r = local.replay(sys.argv[1])
events = r.tables["events"]
print(json.dumps({
    "findings": [{k: f.get(k) for k in ("rule", "severity", "journal", "seq", "message")} for f in r.findings],
    "events": len(events),
    "checked": sum(1 for e in events if e["digest_ok"] is not None),
    "mismatched": sum(1 for e in events if e["digest_ok"] is False),
    "passed": r.passed,
}))
"""


def replay_in_a_subprocess(journals: Path) -> dict:
    """`replay.local` over `journals` with the generator's hash seed: events, digests checked and
    mismatched, findings and the verdict."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(journals)], capture_output=True, text=True, env=env,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def golden_replay():
    return replay_in_a_subprocess(GOLDEN)


def test_the_golden_life_is_all_there():
    segments = sorted(p.name for p in GOLDEN.glob("node-*/segment-*.jsonl.gz"))
    assert len(segments) == 11


def test_every_decision_of_the_golden_life_re_executes_to_the_recorded_digest(golden_replay):
    assert golden_replay["events"] == 20_001
    assert golden_replay["checked"] >= 20_001 - 10
    assert golden_replay["mismatched"] == 0


def test_the_golden_life_has_no_re_execution_or_snapshot_findings(golden_replay):
    rules = {f["rule"] for f in golden_replay["findings"]}
    assert not rules & {"re-execution", "snapshot-mismatch", "undecodable-record"}, golden_replay["findings"][:5]
    assert [f for f in golden_replay["findings"] if f["severity"] == "violation"] == []
    assert rules <= {"process-restart"}
    assert golden_replay["passed"]
