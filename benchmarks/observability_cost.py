"""What the metrics and the logs cost the controller's event loop in a 10,000-partition failover.

    python -m benchmarks.observability_cost [--runs 7] [--partitions 10000] [--json FILE]

The decision on broker 1's failure when it leads every partition (RF 3, 5 brokers: the state of
benchmarks/core_step.py), then the write outcome that releases its requests. For those two
steps it times, on the calling thread (the event loop's, in a node):

- the state-change log as the executor runs it: one record per group queued, nothing formatted;
- for comparison, the same lines formatted and written inline (what the loop would pay without
  the writer thread);
- the writer thread's time to render and write them (off the loop);
- the decision log observer, its line formatted to a null stream (stderr in a node);
- the metrics observer (`ControllerStats`);
- a scrape of the whole state (the HTTP thread): first (a new state value) and again (cached);
- `step()` itself, for scale.

Prints medians of `--runs` (the machine is shared and noisy).
"""
from __future__ import annotations

import argparse
import io
import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest

from adapters.observability import logformat, statelog
from adapters.observability.decisionlog import DecisionLog
from adapters.controller.loop import EventStats
from adapters.observability.metrics import ControllerStats, NodeCollector
from benchmarks.core_step import AT, cluster, tune_gc
from controller_core import commands as C
from controller_core import events as E
from controller_core.step import step


def _ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def _timing(before, after, commands, step_ms: float) -> dict:
    now = time.perf_counter()
    return {"enqueued": now - 0.001, "queue_ms": 1.0, "journal_ms": 0.5, "step_ms": step_ms, "execute_ms": 1.0,
            "done": now, "commands": commands, "before": before, "state": after, "seq": 42}


def measure(partitions: int, runs: int) -> dict:
    state = cluster(partitions)
    tune_gc()
    event = E.BrokersChanged(at=AT, brokers=tuple(state.brokers[b] for b in (2, 3, 4, 5)))
    decided, commands = step(state, event)
    write = next(c for c in commands if type(c) is C.WritePartitionStates)
    outcome = E.PartitionStatesWritten(at=AT, write_id=write.write_id,
                                       versions=tuple((w.tp, w.leader_isr.zk_version) for w in write.writes))
    released, release_commands = step(decided, outcome)
    logs = [(c, decided) for c in commands if type(c) is C.LogStateChanges]
    logs += [(c, released) for c in release_commands if type(c) is C.LogStateChanges]
    groups = sum(len(c.entries) for c, _ in logs)
    listed = sum(len(e.partitions) for c, _ in logs for e in c.entries)

    out: dict = {"partitions": partitions, "runs": runs, "state_change_groups": groups,
                 "state_change_partitions_listed": listed}
    out["step_decide_ms"] = statistics.median(_ms(lambda: step(state, event)) for _ in range(runs))
    out["step_release_ms"] = statistics.median(_ms(lambda: step(decided, outcome)) for _ in range(runs))

    with tempfile.TemporaryDirectory() as tmp:
        # the state-change log, as the executor runs it, and the writer thread behind it
        changes = statelog.StateChangeFile(Path(tmp) / "queued.log", controller_id=5)
        on_loop, writer = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            for c, s in logs:
                statelog.log_state_changes(c, s, 5, 42)
            t1 = time.perf_counter()
            changes.flush()
            on_loop.append((t1 - t0) * 1000)
            writer.append((time.perf_counter() - t1) * 1000)
        changes.close()
        out["statelog_on_loop_ms"] = statistics.median(on_loop)
        out["statelog_writer_thread_ms"] = statistics.median(writer)
        out["statelog_bytes_per_failover"] = (Path(tmp) / "queued.log").stat().st_size // runs
        # the same lines formatted and written on the calling thread
        inline = logging.FileHandler(Path(tmp) / "inline.log", encoding="utf-8")
        inline.setFormatter(logformat.formatter("text"))

        def write_inline():
            for c, s in logs:
                for e in c.entries:
                    inline.handle(logging.LogRecord(statelog.LOGGER_NAME, logging.INFO, __file__, 0,
                                                    statelog.StateChangeLine(5, s.epoch, c.cause, 42, e, s), None, None))
        out["statelog_inline_ms"] = statistics.median(_ms(write_inline) for _ in range(runs))
        inline.close()

    # the decision log, to a null stream
    controller_log = logging.getLogger("kctl.controller")
    saved = (controller_log.handlers[:], controller_log.level, controller_log.propagate)
    null = logging.StreamHandler(io.TextIOWrapper(open(os.devnull, "wb"), encoding="utf-8"))
    null.setFormatter(logformat.formatter("text"))
    controller_log.handlers[:] = [null]
    controller_log.setLevel(logging.INFO)
    controller_log.propagate = False
    try:
        decisions = DecisionLog(5)
        out["decision_log_ms"] = statistics.median(
            _ms(lambda: (decisions(event, _timing(state, decided, commands, 1.0)),
                         decisions(outcome, _timing(decided, released, release_commands, 1.0))))
            for _ in range(runs))
    finally:
        controller_log.handlers[:], controller_log.level, controller_log.propagate = saved

    stats = ControllerStats()
    out["metrics_observer_ms"] = statistics.median(
        _ms(lambda: (stats(event, _timing(state, decided, commands, 1.0)),
                     stats(outcome, _timing(decided, released, release_commands, 1.0))))
        for _ in range(runs))

    # a scrape of the released state from the HTTP thread's side
    node = SimpleNamespace(active=True, senders=None, executor=None,
                           loop=SimpleNamespace(state=released, processing=None, stats=EventStats(),
                                                queue=SimpleNamespace(qsize=lambda: 0)))

    def registry():
        r = CollectorRegistry(auto_describe=False)
        r.register(NodeCollector(node, ControllerStats()))
        return r
    out["scrape_first_ms"] = statistics.median(_ms(lambda: generate_latest(registry())) for _ in range(runs))
    cached = registry()
    generate_latest(cached)
    out["scrape_cached_ms"] = statistics.median(_ms(lambda: generate_latest(cached)) for _ in range(runs))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.partitions < 100:
        ap.error("--runs must be >= 1 and --partitions >= 100")
    r = measure(args.partitions, args.runs)
    print(f"{r['partitions']:,}-partition broker failure: step {r['step_decide_ms']:.1f} ms + release "
          f"{r['step_release_ms']:.1f} ms (median of {r['runs']})")
    print(f"state-change log, {r['state_change_groups']} lines listing {r['state_change_partitions_listed']:,} "
          f"partitions ({r['statelog_bytes_per_failover'] / 1024:.0f} KB):")
    print(f"  on the loop (queued)      {r['statelog_on_loop_ms']:8.3f} ms")
    print(f"  writer thread (off loop)  {r['statelog_writer_thread_ms']:8.1f} ms")
    print(f"  if written inline         {r['statelog_inline_ms']:8.1f} ms")
    print(f"decision log observer       {r['decision_log_ms']:8.3f} ms (both steps, line formatted)")
    print(f"metrics observer            {r['metrics_observer_ms']:8.3f} ms (both steps)")
    print(f"scrape of the state         {r['scrape_first_ms']:8.1f} ms first, {r['scrape_cached_ms']:.1f} ms cached "
          f"(HTTP thread)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
