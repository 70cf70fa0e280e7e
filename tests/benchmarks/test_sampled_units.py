"""benchmarks.sampled_units: a sample of a generated journal's fold units, folded."""
from __future__ import annotations

import pytest

from benchmarks.sampled_units import fold, journal_dir, sampled_units
from replay.generate import generate


def test_sampled_units_fold_with_every_event_checked(tmp_path):
    root = tmp_path / "journals"
    generate(root, events=1500, partitions=40, seed=5, controllers=2, segment_bytes=30_000)
    assert journal_dir(root).parent == root
    assert journal_dir(journal_dir(root)) == journal_dir(root)
    units = sampled_units(root, 3, seed=1)
    assert len(units) == 3 and len({u.unit["unit"] for u in units}) == 3
    assert sampled_units(root, 3, seed=1) == units  # the seed decides the sample
    for u in units:
        f = fold(u)
        events = [r for r in u.records if r[1] == "event"]
        assert f.summary["events"] == len(events) > 0
        assert all(row["digest_ok"] in (True, None) for row in f.events) and any(row["digest_ok"] for row in f.events)
        assert not [x for x in f.findings if x["severity"] == "violation"], f.findings
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="neither journal segments"):
        journal_dir(tmp_path / "empty")
