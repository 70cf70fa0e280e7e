"""A new controller's ControllerElected as the controller loop journals it before deciding it:
`codec.encode_event` (the loop runs it in a worker thread, under the GIL), then the journal's
append (canonical JSON, CRC, write) and its sync; the snapshot from `benchmarks.core_step`
(RF 3, 100 partitions a topic, the reader's columns). Medians of 7, the collector paused as the
loop pauses it around whole-cluster events.

    PYTHONPATH=<checkout> python elected_journal.py
"""
import asyncio
import gc
import statistics
import tempfile
import time
from pathlib import Path

from adapters.journal.writer import Journal
from benchmarks.core_step import snapshot_event
from controller_core import codec

for n in (10_000, 100_000):
    ev = snapshot_event(n)
    enc, app, syn = [], [], []
    for rep in range(7):
        j = Journal.open(Path(tempfile.mkdtemp()), 1)
        gc.collect()
        gc.disable()
        t0 = time.perf_counter()
        body = codec.encode_event(ev)
        t1 = time.perf_counter()
        j.append("event", body, controller_epoch=2, at=ev.at, floats=not codec.FLOAT_FREE)
        t2 = time.perf_counter()
        gc.enable()
        asyncio.run(j.sync())
        t3 = time.perf_counter()
        enc.append(t1 - t0)
        app.append(t2 - t1)
        syn.append(t3 - t2)
        del body
    print(f"{n:>7,} partitions: encode_event {1e3 * statistics.median(enc):6.1f} ms, "
          f"append {1e3 * statistics.median(app):5.1f} ms, sync {1e3 * statistics.median(syn):4.1f} ms")
