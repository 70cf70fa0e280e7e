"""Micro-benchmarks of the pure core (issue 2's speed targets), on this machine.

    python -m benchmarks.core_step [--runs 7]

- broker failure: `step()` on BrokersChanged for a cluster of 10,000 partitions (RF 3, 5 brokers)
  all led by the failed broker, plus the write outcome that releases the requests; the same at
  100,000 partitions (`broker_failure_100k`);
- controlled shutdown: `step()` on ControlledShutdownRequested of broker 1 in a cluster of
  10,000 partitions (RF 3, 5 brokers, leaders rotating: it leads a fifth of them and follows two
  fifths), plus the write outcome that releases the requests and the reply; the same at 100,000
  partitions (`controlled_shutdown_100k`). `--scalar-shutdown` switches the columnar path off
  (`controller_core/columnar_shutdown.py`), which gives the walk of the base code;
- broker startup: `step()` on the BrokersChanged that brings broker 1 back to a cluster of
  10,000 (and 100,000: `broker_startup_100k`) partitions that lost it; `--scalar-startup`
  switches the columnar path off (`controller_core/columnar_startup.py`);
- failover load: `step()` on ControllerElected from a snapshot of 10,000 and 100,000
  partitions (`failover_load`, `ms_10k` / `ms_100k`): what a new controller spends loading;
  and the same with one of the five brokers dead (`dead_broker_ms_10k` / `_100k`), as in the
  failover benchmark's controller-failover, where the old controller's broker dies with it;
- ISR change: `step()` on one PartitionStatesObserved in a cluster of 100,000 partitions, and
  the same with the digest of its commands the loop journals (`with_digest_ms`); that digest
  alone (`digest_ms`, `codec.digest`) and by its definition (`reference_digest_ms`);
- columnar decision (`columnar_decision`): the writes of the same broker failure computed over
  the columnar partition image alone (`controller_core/columnar_failure.py`: the array work,
  without the commands `step()` builds from it in `columnar_brokers.py`) at 10,000 and 100,000
  partitions, rebuilding the image, and one partition's change applied to the 100,000-partition
  image (the changed columns of one chunk copied);
Every measurement runs with the C heap configured as a node process configures it
(`adapters/runtime/heap.py` `configure()`: glibc's mmap threshold fixed at 512 KB).

- memory of the state of 100,000 partitions, RF 3, each in a fresh process: `traced_mb`, what
  tracemalloc counts as still allocated once the state is built and everything else is freed,
  and `rss_mb`, the growth of the resident set while building it (it includes the freed
  snapshot's pages that the allocator keeps, so it is an upper bound), and `rss_after_trim_mb`,
  the same growth once the controller loop has frozen the state and trimmed the C heap as it does
  after a load (adapters/controller/loop.py `_freeze_grown_state`, adapters/runtime/heap.py).

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

import attrs

from controller_core import events as E
from controller_core.snapshot_states import SnapshotStates
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import BrokerInfo, LeaderIsr, TopicPartition, shared_assignment
from replay import shell

AT = 1_700_000_000_000


def cluster(n_partitions: int, brokers=(1, 2, 3, 4, 5), leader: int | None = 1, partitions_per_topic: int = 100):
    """An elected controller over `n_partitions` RF-3 partitions; with `leader` set, that broker
    leads every partition (the benchmark's worst case), else leaders rotate."""
    config = ControllerConfig(broker_id=brokers[-1], auto_leader_rebalance_enable=False)
    event = snapshot_event(n_partitions, brokers, leader, partitions_per_topic)
    return settle(*step(initial_state(config), event))


def settle(state, commands):
    """Every write lands (the in-memory shell, replay/shell.py)."""
    return shell.settle(state, commands, AT)[0]


def time_ms(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def tune_gc() -> None:
    """Configure the collector as the controller loop does after loading a grown state
    (adapters/controller/loop.py, `_freeze_grown_state`): long-lived state is frozen out of the cyclic
    collector's scans."""
    gc.collect()
    gc.freeze()


def bench_broker_failure(runs: int, partitions: int = 10_000) -> dict:
    state = cluster(partitions)
    tune_gc()
    brokers = tuple(state.brokers[b] for b in (2, 3, 4, 5))
    event = E.BrokersChanged(at=AT, brokers=brokers)
    decide = time_ms(lambda: step(state, event), runs)
    after, commands = step(state, event)
    write = next(c for c in commands if type(c).__name__ == "WritePartitionStates")
    outcome = E.PartitionStatesWritten(at=AT, write_id=write.write_id,
                                       versions=tuple((w.tp, w.leader_isr.zk_version) for w in write.writes))
    release = time_ms(lambda: step(after, outcome), runs)
    return {"partitions": partitions, "writes": len(write.writes), "decide_ms": statistics.median(decide),
            "release_ms": statistics.median(release),
            "total_ms": statistics.median(decide) + statistics.median(release), "runs": runs}


def bench_controlled_shutdown(runs: int, partitions: int = 10_000) -> dict:
    state = cluster(partitions, leader=None)
    tune_gc()
    event = E.ControlledShutdownRequested(at=AT, request_id=1, broker_id=1, broker_epoch=state.brokers[1].epoch)
    decide = time_ms(lambda: step(state, event), runs)
    after, commands = step(state, event)
    write = next(c for c in commands if type(c).__name__ == "WritePartitionStates")
    outcome = E.PartitionStatesWritten(at=AT, write_id=write.write_id)
    release = time_ms(lambda: step(after, outcome), runs)
    led = sum(1 for w in write.writes if w.leader_isr.leader != 1 and state.partition(w.tp).leader_isr.leader == 1)
    return {"partitions": partitions, "led": led, "writes": len(write.writes), "decide_ms": statistics.median(decide),
            "release_ms": statistics.median(release),
            "total_ms": statistics.median(decide) + statistics.median(release), "runs": runs}


def bench_broker_startup(runs: int, partitions: int = 10_000) -> dict:
    """Broker 1 comes back to a cluster that lost it (its replicas Offline, out of the ISRs):
    `step()` on the BrokersChanged that lists it again. No write: its replicas go Online and it
    is told every partition it hosts (LeaderAndIsr), every broker the full metadata."""
    state = cluster(partitions, leader=None)
    everyone = tuple(state.brokers.values())
    gone = E.BrokersChanged(at=AT, brokers=tuple(b for b in everyone if b.broker_id != 1))
    state = settle(*step(state, gone))
    tune_gc()
    back = E.BrokersChanged(at=AT, brokers=everyone)
    decide = time_ms(lambda: step(state, back), runs)
    _, commands = step(state, back)
    told = sum(len(c.partitions) for c in commands if type(c).__name__ == "SendLeaderAndIsr" and c.broker_id == 1)
    return {"partitions": partitions, "told": told, "decide_ms": statistics.median(decide), "runs": runs}


def snapshot_event(n_partitions: int, brokers=(1, 2, 3, 4, 5), leader: int | None = None,
                   partitions_per_topic: int = 100) -> E.ControllerElected:
    """ControllerElected with a snapshot of `n_partitions` RF-3 partitions: with `leader` set,
    that broker leads every partition, else leaders rotate. Its values are shared as the
    ZooKeeper reader shares them: equal assignments are one value (`shared_assignment`, as
    adapters/znodes/codec.py and the journal's codec give them; before the morning of
    2026-11-28 each partition had its own), and the partition states are the reader's columns,
    each distinct state content once (`SnapshotStates`, adapters/controller/watches.py; before
    the afternoon of 2026-11-28 a `LeaderIsr` per partition)."""
    n = len(brokers)
    topics, tps, codes, contents, content_index = [], [], [], [], {}
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
            parts.append((p, shared_assignment(replicas)))
            k = content_index.get(replicas)
            if k is None:
                k = content_index[replicas] = len(contents)
                contents.append(LeaderIsr(replicas[0], 0, replicas, 1, 0))
            tps.append(TopicPartition(name, p))
            codes.append(k)
        topics.append((name, tuple(parts)))
    snap = E.ClusterSnapshot(
        brokers=tuple(BrokerInfo(b, "127.0.0.1", 9090 + b, 100 + b) for b in brokers),
        topics=tuple(topics),
        partition_states=SnapshotStates(tuple(tps), tuple(contents), codes, [0] * len(tps)))
    return E.ControllerElected(at=AT, epoch=2, epoch_zk_version=1, snapshot=snap)


def bench_failover_load(runs: int) -> dict:
    config = ControllerConfig(broker_id=5, auto_leader_rebalance_enable=False)
    out = {}
    for n, key in ((10_000, "ms_10k"), (100_000, "ms_100k")):
        event = snapshot_event(n)
        base = initial_state(config)
        out[key] = statistics.median(time_ms(lambda: step(base, event), max(1, runs if n <= 10_000 else min(runs, 3))))
        # the failover the benchmark's controller-failover scenario makes: the old controller's
        # broker (1) died with it, so its replicas go Offline, leave the ISRs, and the partitions
        # it led are elected anew
        event = attrs.evolve(event, snapshot=attrs.evolve(
            event.snapshot, brokers=tuple(b for b in event.snapshot.brokers if b.broker_id != 1)))
        out["dead_broker_" + key] = statistics.median(
            time_ms(lambda: step(base, event), max(1, runs if n <= 10_000 else min(runs, 3))))
    out["runs"] = runs
    return out


def bench_isr_change(runs: int) -> dict:
    from controller_core import codec

    state = cluster(100_000, leader=None)
    tp = TopicPartition("topic-00500", 7)
    li = state.partition(tp).leader_isr
    event = E.PartitionStatesObserved(at=AT, states=((tp, LeaderIsr(li.leader, li.leader_epoch, li.isr[:2], li.controller_epoch, li.zk_version + 1)),))
    decisions = [step(state, event)[1] for _ in range(200)]  # each its own command objects, as live
    samples, with_digest, digest, reference = [], [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(200):
            step(state, event)
        samples.append((time.perf_counter() - t0) * 1000 / 200)
        t0 = time.perf_counter()
        for _ in range(200):
            codec.digest(step(state, event)[1])
        with_digest.append((time.perf_counter() - t0) * 1000 / 200)
        t0 = time.perf_counter()
        for commands in decisions:
            codec.digest(commands)
        digest.append((time.perf_counter() - t0) * 1000 / len(decisions))
        t0 = time.perf_counter()
        for commands in decisions:
            codec.reference_digest(commands)
        reference.append((time.perf_counter() - t0) * 1000 / len(decisions))
    return {"partitions": 100_000, "step_ms": statistics.median(samples),
            "with_digest_ms": statistics.median(with_digest), "digest_ms": statistics.median(digest),
            "reference_digest_ms": statistics.median(reference), "runs": runs}


def bench_columnar_decision(runs: int) -> dict:
    import numpy as np

    from controller_core import columnar_failure
    from controller_core.columns import PartitionImage

    out = {"runs": runs}
    for n, suffix in ((10_000, "10k"), (100_000, "100k")):
        state = cluster(n)
        build = time_ms(lambda: PartitionImage.build(state.partitions), max(1, min(runs, 3)))
        image = PartitionImage.build(state.partitions)
        unclean = np.zeros(image.size, bool)
        live = frozenset((2, 3, 4, 5))
        decided = columnar_failure.decide(image, frozenset((1,)), live, state.epoch, unclean)
        out[f"writes_{suffix}"] = int(len(decided.rows))
        out[f"decide_ms_{suffix}"] = statistics.median(time_ms(
            lambda: columnar_failure.decide(image, frozenset((1,)), live, state.epoch, unclean), runs))
        out[f"build_ms_{suffix}"] = statistics.median(build)
        if n == 100_000:
            tp = TopicPartition("topic-00500", 7)
            li = state.partition(tp).leader_isr
            changed = state.partitions.set(tp, state.partition(tp)._replace(leader_isr=li.with_version(li.zk_version + 1)))
            samples = []
            for _ in range(runs):
                t0 = time.perf_counter()
                for _ in range(100):
                    image.with_partitions(changed, (tp,))
                samples.append((time.perf_counter() - t0) * 1000 / 100)
            out["one_partition_update_ms_100k"] = statistics.median(samples)
    return out


_MEMORY_TRACED = """
import gc, tracemalloc
tracemalloc.start()
from benchmarks.core_step import cluster
gc.collect()
before = tracemalloc.get_traced_memory()[0]
s = cluster(100_000, leader=None)
gc.collect()
print((tracemalloc.get_traced_memory()[0] - before) / 2**20)
"""

def _rss_script(settle: str) -> str:
    """A fresh process's resident-set growth while it builds the state, measured after `settle`,
    with the C heap configured as a node process configures it (adapters/runtime/heap.py)."""
    return f"""
import gc, os
from benchmarks.core_step import cluster
import controller_core.step
from adapters.runtime import heap
heap.configure()
def rss():
    return int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
gc.collect()
before = rss()
s = cluster(100_000, leader=None)
{settle}
print((rss() - before) / 2**20)
"""


_MEMORY_RSS = _rss_script("gc.collect()")
# as the controller loop leaves a grown state (adapters/controller/loop.py, _freeze_grown_state)
_MEMORY_LOOP = _rss_script("heap.freeze_survivors()")


def bench_memory() -> dict:
    """The state's own memory, in fresh processes (see the module docstring)."""
    def run(code: str) -> float:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        return float(out.stdout.strip().splitlines()[-1])

    return {"partitions": 100_000, "traced_mb": round(run(_MEMORY_TRACED), 1), "rss_mb": round(run(_MEMORY_RSS), 1),
            "rss_after_trim_mb": round(run(_MEMORY_LOOP), 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--scalar-shutdown", action="store_true",
                    help="decide controlled shutdowns by the scalar walk (the columnar path switched off)")
    ap.add_argument("--scalar-startup", action="store_true",
                    help="decide broker startups by the scalar walk (the columnar path switched off)")
    args = ap.parse_args(argv)
    # the C heap as a node process has it (its mmap threshold fixed: adapters/runtime/heap.py;
    # before the evening of 2026-11-28 the benchmark, like the node, left glibc's default)
    from adapters.runtime import heap

    heap.configure()
    if args.scalar_shutdown:
        from controller_core import columnar_shutdown
        columnar_shutdown.ENABLED = False
    if args.scalar_startup:
        from controller_core import columnar_startup
        columnar_startup.ENABLED = False
    results = {"broker_failure": bench_broker_failure(args.runs),
               "broker_failure_100k": bench_broker_failure(max(1, min(args.runs, 3)), 100_000),
               "controlled_shutdown": bench_controlled_shutdown(args.runs),
               "controlled_shutdown_100k": bench_controlled_shutdown(max(1, min(args.runs, 3)), 100_000),
               "broker_startup": bench_broker_startup(args.runs),
               "broker_startup_100k": bench_broker_startup(max(1, min(args.runs, 3)), 100_000),
               "failover_load": bench_failover_load(args.runs),
               "isr_change": bench_isr_change(args.runs),
               "memory": bench_memory(),
               "columnar_decision": bench_columnar_decision(args.runs)}
    bf, bf100, fl = results["broker_failure"], results["broker_failure_100k"], results["failover_load"]
    ic, mem = results["isr_change"], results["memory"]
    for name, r, target in (("10,000", bf, 15), ("100,000", bf100, 150)):
        print(f"broker failure, {name} partitions led by the failed broker: step {r['decide_ms']:.1f} ms "
              f"+ release {r['release_ms']:.1f} ms = {r['total_ms']:.1f} ms (median of {r['runs']}; target <= {target})")
    for name, r in (("10,000", results["controlled_shutdown"]), ("100,000", results["controlled_shutdown_100k"])):
        print(f"controlled shutdown, {name} partitions ({r['led']} led, {r['writes']} writes"
              f"{', scalar walk' if args.scalar_shutdown else ''}): step {r['decide_ms']:.1f} ms "
              f"+ release {r['release_ms']:.1f} ms = {r['total_ms']:.1f} ms (median of {r['runs']})")
    for name, r in (("10,000", results["broker_startup"]), ("100,000", results["broker_startup_100k"])):
        print(f"broker startup, {name} partitions ({r['told']} told to the returning broker"
              f"{', scalar walk' if args.scalar_startup else ''}): step {r['decide_ms']:.1f} ms (median of {r['runs']})")
    print(f"ControllerElected from a snapshot: 10,000 partitions {fl['ms_10k']:.1f} ms (target <= 25), "
          f"100,000 partitions {fl['ms_100k']:.1f} ms (target <= 250); with one of the five brokers dead "
          f"{fl['dead_broker_ms_10k']:.1f} / {fl['dead_broker_ms_100k']:.1f} ms")
    print(f"ISR change on 100,000 partitions: step {ic['step_ms'] * 1000:.1f} us, with its digest "
          f"{ic['with_digest_ms'] * 1000:.1f} us (median of {ic['runs']}; target <= 40 us in all); the digest "
          f"alone {ic['digest_ms'] * 1000:.1f} us (codec.reference_digest {ic['reference_digest_ms'] * 1000:.1f} us)")
    print(f"state of 100,000 partitions, RF 3: {mem['traced_mb']} MB allocated (tracemalloc), resident set grew "
          f"{mem['rss_mb']} MB while building it (target <= 40), {mem['rss_after_trim_mb']} MB once frozen and trimmed "
          f"as the controller loop leaves it")
    cd = results["columnar_decision"]
    print(f"columnar broker-failure writes (array work only): 10,000 partitions {cd['decide_ms_10k']:.1f} ms, "
          f"100,000 partitions {cd['decide_ms_100k']:.1f} ms; rebuilding the image "
          f"{cd['build_ms_10k']:.0f} / {cd['build_ms_100k']:.0f} ms; one partition's change on the 100,000-partition "
          f"image {cd['one_partition_update_ms_100k'] * 1000:.0f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
