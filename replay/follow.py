"""`kctl replay --follow`: keep auditing the journals' segments as they close, until SIGINT.

A polling loop, not Spark Structured Streaming's file source, because what can be audited is a
*closed* segment (the writer still appends to each journal's last one), a fold unit needs its
whole head segment and the next unit's head to know where it ends, and the per-partition audit
and the cross-unit checks run over the whole history. The file source hands out new files as
micro-batches of lines with no notion of a closed segment or of a journal's order, and its
checkpoint remembers file names where ours remembers contents. So the loop lists the journal
directories (plain `os.scandir`, no Spark) every `poll` seconds and, when the closed segments
changed, runs the incremental job (`replay.job.run(closed_only=True)`): its checkpoint under
`--out` makes each pass re-execute only the new segments.

Each pass prints the findings not printed before, one line each, then one status line. SIGINT
lets the pass in progress finish (its checkpoint is written at its end) and then stops: exit 0
when the last verdict passed, 1 on a violation. A second SIGINT interrupts at once.
"""
from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

from . import report

_SEGMENT = re.compile(r"^segment-(\d{20})\.jsonl(\.gz)?$")


def closed_segments(roots: list[str]) -> tuple:
    """(path, size, mtime) of every segment under `roots` that is not its journal's last: what a
    pass would audit. Only a trigger: the job compares contents, not these."""
    by_dir: dict[str, list[tuple[int, str]]] = {}
    for root in roots:
        for dirpath, _, names in os.walk(root):
            for name in names:
                m = _SEGMENT.match(name)
                if m:
                    by_dir.setdefault(dirpath, []).append((int(m.group(1)), os.path.join(dirpath, name)))
    out = []
    for dirpath, segs in sorted(by_dir.items()):
        last = max(n for n, _ in segs)
        for n, path in sorted(segs):
            if n != last:
                try:
                    st = os.stat(path)
                except FileNotFoundError:  # compressed and renamed meanwhile: the next poll sees it
                    continue
                out.append((path, st.st_size, st.st_mtime_ns))
    return tuple(out)


def _key(f: dict) -> tuple:
    return (f.get("severity"), f.get("rule"), f.get("journal"), f.get("file"), f.get("line"), f.get("seq"),
            f.get("topic"), f.get("partition"), f.get("detail"))


def follow(spark, journals: list[str], out: str, *, poll: float = 2.0, full: bool = False, stream=None) -> int:
    """Audit closed segments until SIGINT; return the exit code of the last verdict. `full`: the
    first pass starts from scratch."""
    from . import job

    stream = stream or sys.stdout
    # a plain flag, not a threading.Event: the handler runs in the main thread, which may be
    # holding that Event's lock inside its own wait when the signal lands (setting the Event
    # from the handler then waited for itself forever)
    stopping = [False]

    def on_sigint(signum, frame):
        if stopping[0]:
            raise KeyboardInterrupt
        stopping[0] = True
        try:
            print("stopping after this pass (SIGINT again to interrupt)", file=stream, flush=True)
        except RuntimeError:  # (the main thread was writing to the same stream: it says so when it stops)
            pass

    previous = signal.signal(signal.SIGINT, on_sigint)
    printed: set[tuple] = set()
    seen = None
    code = 0
    passes = 0
    print(f"following {' '.join(journals)}: auditing segments as they close (every {poll:g} s; Ctrl-C stops)",
          file=stream, flush=True)
    try:
        while not stopping[0]:
            listing = closed_segments(journals)
            if listing and listing != seen:
                found: list[dict] = []
                result = job.run(spark, journals, out, quiet=True, closed_only=True, on_findings=found.extend,
                                 full=full and passes == 0)
                if result == 2:
                    return 2
                seen = listing
                passes += 1
                code = result
                fresh = [f for f in report._ordered(found) if _key(f) not in printed]
                for f in fresh:
                    printed.add(_key(f))
                    print(f"  {f['severity']} {f['rule']}: {report.where(f)}: {f.get('detail') or ''}", file=stream,
                          flush=True)
                stats = json.loads((Path(job._norm(out)) / "summary.json").read_text())["stats"]
                inc = stats.get("incremental", {})
                print(f"audited {stats['segments']:,} closed segment(s), {stats['events']:,} events "
                      f"({inc.get('events_executed', 0):,} re-executed now): "
                      f"{'PASS' if result == 0 else 'FAIL (violations found)'}", file=stream, flush=True)
            deadline = time.monotonic() + poll
            while not stopping[0] and (left := deadline - time.monotonic()) > 0:
                time.sleep(min(left, 0.1))
    finally:
        signal.signal(signal.SIGINT, previous)
    print(f"stopped after {passes} pass(es); checkpoint saved in {out}/_checkpoint; verdict: "
          f"{'PASS' if code == 0 else 'FAIL (violations found)'}", file=stream, flush=True)
    return code
