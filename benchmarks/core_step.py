"""Micro-benchmarks of the pure core (issue 2's speed targets), on this machine.

    python -m benchmarks.core_step [--runs 7]

- broker failure: `step()` on BrokersChanged for a cluster of 10,000 partitions (RF 3, 5 brokers)
  all led by the failed broker, plus the write outcome that releases the requests;
- ISR change: `step()` on one PartitionStatesObserved in a cluster of 100,000 partitions;
- resident memory of the state for 100,000 partitions, RF 3 (measured in a fresh process).

Prints medians of several runs (the machine is shared and noisy) and writes JSON with --json.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time

from controller_core import events as E
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import BrokerInfo, LeaderIsr, ReplicaAssignment, TopicPartition

AT = 1_700_000_000_000


def cluster(n_partitions: int, brokers=(1, 2, 3, 4, 5), leader: int | None = 1, partitions_per_topic: int = 100):
    """An elected controller over `n_partitions` RF-3 partitions; with `leader` set, that broker
    leads every partition (the benchmark's worst case), else leaders rotate."""
    n = len(brokers)
    topics, states = [], []
    for t in range(n_partitions // partitions_per_topic):
        name = f"topic-{t:05d}"
        parts = []
        for p in range(partitions_per_topic):
            i = t * partitions_per_topic + p
            if leader is not None:
                others = [b for b in brokers if b != leader]
                replicas = (leader, others[i % (n - 1)], others[(i + 1) % (n - 1)])
            else:
                replicas = tuple(brokers[(i + k) % n] for k in range(3))
            parts.append((p, ReplicaAssignment(replicas)))
            states.append((TopicPartition(name, p), LeaderIsr(replicas[0], 0, replicas, 1, 0)))
        topics.append((name, tuple(parts)))
    snap = E.ClusterSnapshot(
        brokers=tuple(BrokerInfo(b, "127.0.0.1", 9090 + b, 100 + b) for b in brokers),
        topics=tuple(topics), partition_states=tuple(states))
    config = ControllerConfig(broker_id=brokers[-1], auto_leader_rebalance_enable=False)
    state, commands = step(initial_state(config), E.ControllerElected(at=AT, epoch=2, epoch_zk_version=1, snapshot=snap))
    return settle(state, commands)


def settle(state, commands):
    from controller_core.commands import WritePartitionStates

    for c in commands:
        if isinstance(c, WritePartitionStates):
            versions = tuple((w.tp, w.leader_isr.zk_version) for w in c.writes)
            state, _ = step(state, E.PartitionStatesWritten(at=AT, write_id=c.write_id, versions=versions))
    return state


def time_ms(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def tune_gc() -> None:
    """Configure the collector as the runtime does (adapters/runtime.py): long-lived state is
    frozen out of the cyclic collector's scans after loading."""
    gc.collect()
    gc.freeze()


def bench_broker_failure(runs: int) -> dict:
    state = cluster(10_000)
    tune_gc()
    brokers = tuple(state.brokers[b] for b in (2, 3, 4, 5))
    event = E.BrokersChanged(at=AT, brokers=brokers)
    decide = time_ms(lambda: step(state, event), runs)
    after, commands = step(state, event)
    write = next(c for c in commands if type(c).__name__ == "WritePartitionStates")
    outcome = E.PartitionStatesWritten(at=AT, write_id=write.write_id,
                                       versions=tuple((w.tp, w.leader_isr.zk_version) for w in write.writes))
    release = time_ms(lambda: step(after, outcome), runs)
    return {"partitions": 10_000, "writes": len(write.writes), "decide_ms": statistics.median(decide),
            "release_ms": statistics.median(release),
            "total_ms": statistics.median(decide) + statistics.median(release), "runs": runs}


def bench_isr_change(runs: int) -> dict:
    state = cluster(100_000, leader=None)
    tp = TopicPartition("topic-00500", 7)
    li = state.partitions[tp].leader_isr
    event = E.PartitionStatesObserved(at=AT, states=((tp, LeaderIsr(li.leader, li.leader_epoch, li.isr[:2], li.controller_epoch, li.zk_version + 1)),))
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(200):
            step(state, event)
        samples.append((time.perf_counter() - t0) * 1000 / 200)
    return {"partitions": 100_000, "step_ms": statistics.median(samples), "runs": runs}


def bench_memory() -> dict:
    code = (
        "import gc, resource; from benchmarks.core_step import cluster; "
        "import os; before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
        "s = cluster(100_000, leader=None); gc.collect(); "
        "rss = int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE'); "
        "print(rss // (1024 * 1024))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {"partitions": 100_000, "rss_mb": int(out.stdout.strip().splitlines()[-1])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)
    results = {"broker_failure": bench_broker_failure(args.runs),
               "isr_change": bench_isr_change(args.runs),
               "memory": bench_memory()}
    bf, ic, mem = results["broker_failure"], results["isr_change"], results["memory"]
    print(f"broker failure, 10,000 partitions led by the failed broker: step {bf['decide_ms']:.1f} ms "
          f"+ release {bf['release_ms']:.1f} ms = {bf['total_ms']:.1f} ms (median of {bf['runs']}; target <= 50)")
    print(f"ISR change on 100,000 partitions: {ic['step_ms']:.3f} ms (median of {ic['runs']}; target <= 0.5)")
    print(f"state of 100,000 partitions, RF 3: {mem['rss_mb']} MB resident (target <= 300)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
