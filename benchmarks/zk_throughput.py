"""How fast can we write (and read) partition states in ZooKeeper from Python, on this machine?

    python -m benchmarks.zk_throughput [--partitions 10000] [--reads 100000] [--zookeeper H:P]
                                       [--methods writer,batched,raw] [--chunks 200]

Against a real ZooKeeper (the embedded one unless --zookeeper is given), for the same 10,000
partition-state znodes:

- sequential: one conditional set at a time, waiting for each answer (Kafka <= 1.0's way);
- kafka-multi x10: Kafka 2.x's way, one multi-op (epoch check + set) per partition, 10 in flight;
- pipelined: one conditional set per partition, all sent without waiting;
- raw aiozk: the bare client, pipelined sets and 100-op transactions (the floor of the issue);
- write_partition_states: epoch-checked multi-ops sent concurrently, for several chunk sizes
  (the values already encoded);
- zk-floor: the failover benchmark's Python floor (benchmarks/floors.py): the same multi-op
  frames, encoded before the clock starts;
- ZkWriter: the controller's own path, a `WritePartitionStates` command of --partitions writes
  executed by adapters/controller/zkwriter.py as the controller does (paths, encoding, progress
  reports, the `PartitionStatesWritten` outcome), so the writer's costs show against the
  session-level rows;
- get_many: reads of the same znodes batched into multiRead requests, and one request per read;
  then the same for --reads znodes (a new controller reading the whole tree).

Each method runs --runs times, interleaved with the others; the table shows medians of wall time
and of this process's CPU time (`time.process_time`: the client's share, not the JVM's; the
figure to quote on a loaded machine). --methods picks some of: sequential, kafka, pipelined, raw,
batched, writer, floor, reads (default: all; at 100,000 partitions the one-at-a-time methods take
minutes). --json FILE also writes the rows.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import statistics
import shutil
import tempfile
import time
import uuid

from adapters.zookeeper import session as zk_module
from adapters.zookeeper.session import ZkSession, parse_connect_string
from adapters.zookeeper.server import EmbeddedZooKeeper
from adapters.zookeeper.session import SetData
from adapters.controller.zkwriter import PROGRESS_MIN, PROGRESS_PARTS, ZkWriter
from controller_core.commands import PartitionWrite, WritePartitionStates
from controller_core.values import LeaderIsr, TopicPartition
from adapters.zookeeper.wire import _OpError
from benchmarks.floors import write_frames
import aiozk

PER_TOPIC = 100
METHODS = ("sequential", "kafka", "pipelined", "raw", "batched", "writer", "floor", "reads")


class Timer:
    """Wall and this process's CPU time from construction to `stop()`."""

    def __init__(self):
        self.cpu = time.process_time()
        self.wall = time.perf_counter()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def state_json(leader: int, leader_epoch: int, controller_epoch: int = 1) -> bytes:
    return (b'{"controller_epoch":%d,"leader":%d,"version":1,"leader_epoch":%d,"isr":[%d,%d,%d]}'
            % (controller_epoch, leader, leader_epoch, leader, leader % 5 + 1, (leader + 1) % 5 + 1))


def state_paths(n: int, prefix: str = "bench") -> list[str]:
    return [f"/brokers/topics/{prefix}-{i // PER_TOPIC:04d}/partitions/{i % PER_TOPIC}/state" for i in range(n)]


class Bench:
    def __init__(self, zk: ZkSession, paths: list[str]):
        self.zk = zk
        self.paths = paths
        self.versions = {path: -1 for path in paths}
        self.epoch_version = 0
        self.round = 0
        self.stalls_ms: list[float] = []  # the longest loop stall of each writer run
        self.gc: list[tuple[int, float]] = []  # (full collections, seconds in the collector) of each writer run

    def next_writes(self):
        self.round += 1
        return [(path, state_json(1 + self.round % 5, self.round), self.versions[path]) for path in self.paths]

    async def create_all(self) -> tuple[float, float]:
        await self.zk.create("/controller_epoch", b"1")
        timer = Timer()
        versions, conflicts = await self.zk.write_partition_states(self.epoch_version, self.next_writes())
        assert not conflicts
        self.versions.update(versions)
        return timer.stop()

    async def sequential(self) -> float:
        writes = self.next_writes()
        timer = Timer()
        for path, data, version in writes:
            stat = await self.zk.set(path, data, version)
            self.versions[path] = stat.version
        return timer.stop()

    async def kafka_multi(self, in_flight: int = 10) -> float:
        writes = self.next_writes()
        queue = iter(writes)

        async def worker():
            for path, data, version in queue:
                (stat,) = await self.zk.multi([SetData(path, data, version)], self.epoch_version)
                self.versions[path] = stat.version

        timer = Timer()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return timer.stop()

    async def pipelined(self) -> float:
        writes = self.next_writes()
        timer = Timer()
        stats = await asyncio.gather(*(self.zk.set(path, data, version) for path, data, version in writes))
        for (path, _, _), stat in zip(writes, stats):
            self.versions[path] = stat.version
        return timer.stop()

    async def batched(self, chunk_ops: int) -> float:
        writes = self.next_writes()
        timer = Timer()
        versions, conflicts = await self.zk.write_partition_states(self.epoch_version, writes, chunk_ops=chunk_ops)
        elapsed = timer.stop()
        assert not conflicts and len(versions) == len(writes)
        self.versions.update(versions)
        return elapsed

    async def floor(self) -> tuple[float, float]:
        """The failover benchmark's zk-floor: the product's multi-op frames, encoded before the
        clock starts, sent over the product's connection all at once; only the answers are read
        (by the general multi parser). What is left is the client's least cost."""
        self.round += 1
        data = state_json(1 + self.round % 5, self.round)
        by_version = collections.defaultdict(list)
        for path in self.paths:
            by_version[self.versions[path]].append(path)
        requests = [r for version, paths in by_version.items()
                    for r in write_frames(self.zk, paths, data, version, self.epoch_version)]
        session = self.zk._session
        timer = Timer()
        results = await asyncio.gather(*(session.send(r, session.generation, retry_in_flight=False)
                                          for r in requests))
        elapsed = timer.stop()
        assert all(not isinstance(x, _OpError) for result in results for x in result)
        for path in self.paths:
            self.versions[path] += 1
        return elapsed

    async def writer(self) -> tuple[float, float]:
        """The controller's path: a `WritePartitionStates` of every partition, executed by the
        ZooKeeper writer from the command to its `PartitionStatesWritten` outcome."""
        self.round += 1
        writes = []
        for i, path in enumerate(self.paths):
            leader = 1 + self.round % 5
            state = LeaderIsr(leader, self.round, (leader, leader % 5 + 1, (leader + 1) % 5 + 1), 1,
                              self.versions[path] + 1)
            tp = TopicPartition(f"bench-{i // PER_TOPIC:04d}", i % PER_TOPIC)
            writes.append(PartitionWrite(tp=tp, leader_isr=state, expected_version=self.versions[path]))
        command = WritePartitionStates(write_id=self.round, writes=tuple(writes))
        events = []
        writer = ZkWriter(self.zk, events.append)
        ticker = asyncio.create_task(_ticker(self.stalls_ms))
        await asyncio.sleep(0)
        gc_meter = GcMeter()
        timer = Timer()
        await writer._write_states(command, self.epoch_version)
        elapsed = timer.stop()
        self.gc.append(gc_meter.stop())
        ticker.cancel()
        final = [e for e in events if e.final]
        assert len(final) == 1 and not final[0].conflicts and not final[0].versions, final
        assert len(events) == 1 + (PROGRESS_PARTS - 1 if len(writes) >= PROGRESS_MIN else 0), len(events)
        for path in self.paths:
            self.versions[path] += 1
        return elapsed

    async def raw_aiozk(self, connect_string: str, chunk: int | None) -> float:
        """The bare aiozk client: pipelined sets (chunk None) or `chunk`-op transactions."""

        hosts, chroot = parse_connect_string(connect_string)
        client = aiozk.ZKClient(hosts, chroot=chroot, session_timeout=10)
        await client.start()
        writes = self.next_writes()
        try:
            timer = Timer()
            if chunk is None:
                stats = await asyncio.gather(*(client.set(p, d, v) for p, d, v in writes))
                for (path, _, _), stat in zip(writes, stats):
                    self.versions[path] = stat.version
            else:
                async def commit(part):
                    txn = client.begin_transaction()
                    for path, data, version in part:
                        txn.set_data(path, data, version)
                    assert await txn.commit()
                await asyncio.gather(*(commit(writes[i:i + chunk]) for i in range(0, len(writes), chunk)))
                for path, _, version in writes:
                    self.versions[path] = version + 1
            return timer.stop()
        finally:
            await client.close()

    async def reads(self, batch: int | None = None) -> tuple[float, float]:
        timer = Timer()
        if batch is None:
            got = await self.zk.get_many(self.paths)
        else:  # the same reads without multiRead (what a client for ZooKeeper < 3.6 does)
            got = await self.zk._read_many(zk_module._GET_DATA, self.paths, zk_module.READ_WINDOW, batch=batch)
        elapsed = timer.stop()
        assert len(got) == len(self.paths) and all(v is not None for v in got.values())
        return elapsed


class GcMeter:
    """Collections by CPython's cyclic collector from construction to `stop()`: how many were
    full (generation 2) ones, and the seconds spent in all of them. A full collection walks every
    tracked object of the process: in a 100,000-partition controller, seconds."""

    def __init__(self):
        self.full = 0
        self.seconds = 0.0
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.full += info["generation"] == 2

    def stop(self) -> tuple[int, float]:
        gc.callbacks.remove(self._callback)
        return self.full, self.seconds


async def _ticker(out: list[float], period: float = 0.005) -> None:
    """Wakes every `period` and appends to `out` (replacing its own last entry) the longest
    lateness seen: how long the loop was held by something else, e.g. a chunk's encoding."""
    loop = asyncio.get_running_loop()
    out.append(0.0)
    while True:
        due = loop.time() + period
        await asyncio.sleep(period)
        out[-1] = max(out[-1], (loop.time() - due) * 1000)


async def run(connect_string: str, partitions: int, reads: int, chunk_sizes: list[int], runs: int,
              methods: tuple[str, ...] = METHODS) -> list[dict]:
    chroot = f"/bench-{uuid.uuid4().hex[:8]}"
    zk = await ZkSession.connect(connect_string + chroot, session_timeout_ms=30000)
    rows = []

    def row(name: str, ops: int, samples: list[tuple[float, float]], note: str = ""):
        seconds = [wall for wall, _ in samples]
        median = statistics.median(seconds)
        cpu = statistics.median(c for _, c in samples)
        rows.append({"name": name, "ops": ops, "runs": len(seconds), "median_s": median,
                     "ops_per_s": ops / median, "min_s": min(seconds), "max_s": max(seconds),
                     "cpu_median_s": cpu, "cpu_s": [c for _, c in samples], "note": note})
        print(f"  {name:<42} {ops:>7} {median:8.3f} s {ops / median:>10,.0f} ops/s {cpu:8.3f} s"
              f"   ({min(seconds):.3f}-{max(seconds):.3f} s) {note}", flush=True)

    try:
        bench = Bench(zk, state_paths(partitions))
        print(f"  {'':<42} {'ops':>7} {'median':>10} {'rate':>16} {'cpu':>10}   (min-max over {runs} runs)")
        row("create (write_partition_states)", partitions, [await bench.create_all()],
            f"+ {partitions // PER_TOPIC * (PER_TOPIC + 1)} parents, 1 run")
        measured: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
        for _ in range(runs):  # interleaved, so JIT warm-up and machine noise hit every method
            if "sequential" in methods:
                measured["sequential conditional sets (await each)"].append(await bench.sequential())
            if "kafka" in methods:
                measured["kafka 2.x: multi(check+set) x10 in flight"].append(await bench.kafka_multi())
            if "pipelined" in methods:
                measured["pipelined conditional sets"].append(await bench.pipelined())
            if "raw" in methods:
                measured["raw aiozk: pipelined sets"].append(await bench.raw_aiozk(connect_string + chroot, None))
                measured["raw aiozk: 100-op transactions"].append(await bench.raw_aiozk(connect_string + chroot, 100))
            if "batched" in methods:
                for size in chunk_sizes:
                    measured[f"write_partition_states chunk={size}"].append(await bench.batched(size))
            if "writer" in methods:
                measured["ZkWriter: WritePartitionStates"].append(await bench.writer())
            if "floor" in methods:
                measured["zk-floor: pre-encoded frames, sent at once"].append(await bench.floor())
            if "reads" in methods:
                measured["get_many (multiRead)"].append(await bench.reads())
                measured["get_many, one request per read"].append(await bench.reads(batch=1))
        for name, samples in measured.items():
            note = ""
            if name.startswith("ZkWriter"):
                note = (f"longest loop stall {max(bench.stalls_ms):.0f} ms; full collections "
                        f"{'/'.join(str(full) for full, _ in bench.gc)}, in the collector "
                        f"{statistics.median(sec for _, sec in bench.gc) * 1000:.0f} ms (median)")
            row(name, partitions, samples, note)
        if "reads" in methods and reads > partitions:
            big = Bench(zk, state_paths(reads, prefix="read"))
            row("create (write_partition_states)", reads, [await big_create(big)], "unfenced, for the read test")
            row("get_many (multiRead)", reads, [await big.reads() for _ in range(runs)])
            row("get_many, one request per read", reads, [await big.reads(batch=1)])
    finally:
        await zk.delete_recursive("/")
        await zk.close()
    return rows


async def big_create(bench: Bench) -> tuple[float, float]:
    timer = Timer()
    versions, conflicts = await bench.zk.write_partition_states(None, bench.next_writes())
    bench.versions.update(versions)
    return timer.stop()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--reads", type=int, default=100_000)
    parser.add_argument("--chunks", default="50,100,200,500,1000,2000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--zookeeper", help="an existing ZooKeeper (default: start the embedded one)")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"some of {','.join(METHODS)}")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    chunk_sizes = [int(c) for c in args.chunks.split(",") if c]
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    unknown = set(methods) - set(METHODS)
    if unknown:
        parser.error(f"unknown methods {', '.join(sorted(unknown))} (choose from {', '.join(METHODS)})")
    server = data_dir = None
    connect_string = args.zookeeper
    if not connect_string:
        data_dir = tempfile.mkdtemp(prefix="kctl-bench-zk-")
        server = EmbeddedZooKeeper(data_dir).start()
        connect_string = server.connect_string
        print(f"embedded ZooKeeper {server.version()} at {connect_string}")
    try:
        rows = asyncio.run(run(connect_string, args.partitions, args.reads, chunk_sizes, args.runs, methods))
    finally:
        if server:
            server.stop()
            shutil.rmtree(data_dir, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
