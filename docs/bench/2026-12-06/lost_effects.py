"""Why the seed-6 soak's replay counted chaos-29 offline for 115 s: its deletion was decided by
events whose "effects" records were lost with their controller's process, which the replay's
plan took for events the live loop never stepped (before 4b37bba; fixed there).

    python lost_effects.py NODE_JOURNAL_DIR FIRST_SEQ LAST_SEQ TOPIC

Prints the fold units around the range, which events of the range have an effects record, and
the TOPIC rows each unit's fold produces.
"""
import gzip
import json
import sys
from pathlib import Path

from benchmarks.sampled_units import fold, sampled_units

journal, first, last, topic = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
records = []
for seg in sorted(journal.glob("segment-*")):
    data = seg.read_bytes()
    for line in (gzip.decompress(data) if seg.name.endswith(".gz") else data).decode().splitlines():
        r = json.loads(line)
        records.append((seg.name, r))
confirmed = {r["body"]["event_seq"] for _, r in records if r["type"] == "effects"}
for name, r in records:
    if first <= r["seq"] <= last and r["type"] in ("event", "snapshot"):
        kind = r["body"].get("type", "snapshot")
        mark = "effects recorded" if r["seq"] in confirmed else "NO effects record" if r["type"] == "event" else ""
        print(f"{name} seq {r['seq']:>5} epoch {r['controller_epoch']:>3} {kind:28s} {mark}")
units = sorted(sampled_units(journal, 1 << 30), key=lambda u: u.unit["lo"])
for u in units:
    if u.unit["hi"] >= first and u.unit["lo"] <= last:
        f = fold(u)
        rows = [(r["seq"], r["kind"]) for r in f.timeline if r["topic"] == topic]
        print(f"unit {u.unit['unit']}: head seq {u.unit['snapshot_seq']}, re-executes {u.unit['lo']} < seq <= "
              f"{u.unit['hi']}: {f.summary['events']} events, {len(rows)} {topic} rows, kinds "
              f"{sorted({k for _, k in rows})}")
