"""A hash of every table the plain replay gives for journal directories (timings left out)."""
import sys, json, hashlib
from pathlib import Path
from replay import local
TIMING = ("replay_us", "step_seconds", "fold_seconds", "parse_seconds", "write_seconds")
out = []
for root in sys.argv[1:]:
    r = local.replay(sorted(p for p in Path(root).iterdir() if p.is_dir()))
    h = hashlib.sha256()
    for name in sorted(r.tables):
        rows = [{k: v for k, v in row.items() if k not in TIMING} if isinstance(row, dict) else row for row in r.tables[name]]
        h.update(name.encode()); h.update(json.dumps(rows, sort_keys=True, default=str).encode())
    out.append(f"{root}: passed={r.passed} rows={sum(len(v) for v in r.tables.values())} {h.hexdigest()[:16]}")
print("\n".join(out))
