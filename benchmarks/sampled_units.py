"""A few fold units of a journal, drawn at random, with what `UnitFold.run` takes: for measuring
one part of the replay (a step type, the history rows, the digest) on a sample instead of a
whole million-event journal, and for checking that two commits fold them alike.

    from benchmarks.sampled_units import sampled_units, fold
    for u in sampled_units("J", 8, seed=4):
        f = fold(u)           # a replay.fold.UnitFold, folded
        f.timeline, f.events  # its history rows

`journal` is a journal directory (segment files) or a directory of them, as `replay.generate`
writes one per node (`node-1/`, ...): then `node` picks one (the first by default). The units are
those `replay.plan` cuts (one per snapshot-headed segment, with the boundary records of the
segments after it), read and checked by `replay.local.scan` as the plain replay reads them.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import NamedTuple

from replay import local
from replay.fold import UnitFold
from replay.plan import plan_units


class SampledUnit(NamedTuple):
    unit: dict  # the plan's unit, as UnitFold takes it
    head: str  # its head snapshot's line
    records: list  # its records after the head, by seq: (seq, type, file, line, text, event_seq)


def journal_dir(journal, node: int = 0) -> Path:
    """The journal directory itself, or its `node`-th directory (sorted) if it holds no segment."""
    path = Path(journal)
    if any(p.name.startswith("segment-") for p in path.iterdir()):
        return path
    nodes = sorted(p for p in path.iterdir() if p.is_dir())
    if not nodes:
        raise ValueError(f"{path} holds neither journal segments nor journal directories")
    return nodes[node]


def sampled_units(journal, count: int, seed: int = 4, node: int = 0) -> list[SampledUnit]:
    """`count` units (all of them if there are fewer) drawn with `random.Random(seed)`."""
    summaries, records, _, _ = local.scan(journal_dir(journal, node))
    units, _ = plan_units(summaries)
    picked = random.Random(seed).sample(units, min(count, len(units)))
    out = []
    for u in picked:
        recs = sorted(r for s in summaries for r in records.get(s.path, ())
                      if r[1] != "snapshot" and u.lo < (r[5] if r[1] == "effects" else r[0]) <= u.tail)
        out.append(SampledUnit(u._asdict(), records[u.head_path][0][4], recs))
    return out


def fold(unit: SampledUnit, journal_name: str = "j") -> UnitFold:
    """The unit folded, as a fold task folds it (without writing its rows)."""
    return UnitFold(unit.unit, journal_name).run(unit.head, unit.records)
