"""How fast can we write (and read) partition states in ZooKeeper from Python, on this machine?

    python -m benchmarks.zk_throughput [--partitions 10000] [--reads 100000] [--zookeeper H:P]

Against a real ZooKeeper (the embedded one unless --zookeeper is given), for the same 10,000
partition-state znodes:

- sequential: one conditional set at a time, waiting for each answer (Kafka <= 1.0's way);
- kafka-multi x10: Kafka 2.x's way, one multi-op (epoch check + set) per partition, 10 in flight;
- pipelined: one conditional set per partition, all sent without waiting;
- raw aiozk: the bare client, pipelined sets and 100-op transactions (the floor of the issue);
- write_partition_states: epoch-checked multi-ops sent concurrently, for several chunk sizes;
- get_many: reads of the same znodes batched into multiRead requests, and one request per read;
  then the same for --reads znodes (a new controller reading the whole tree).

Each method runs --runs times, interleaved with the others; the table shows medians (this
machine has 2 cores shared by the client, the JVM and whatever else runs). --json FILE also
writes the rows.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
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
import aiozk

PER_TOPIC = 100


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

    def next_writes(self):
        self.round += 1
        return [(path, state_json(1 + self.round % 5, self.round), self.versions[path]) for path in self.paths]

    async def create_all(self) -> float:
        await self.zk.create("/controller_epoch", b"1")
        start = time.perf_counter()
        versions, conflicts = await self.zk.write_partition_states(self.epoch_version, self.next_writes())
        assert not conflicts
        self.versions.update(versions)
        return time.perf_counter() - start

    async def sequential(self) -> float:
        writes = self.next_writes()
        start = time.perf_counter()
        for path, data, version in writes:
            stat = await self.zk.set(path, data, version)
            self.versions[path] = stat.version
        return time.perf_counter() - start

    async def kafka_multi(self, in_flight: int = 10) -> float:
        writes = self.next_writes()
        queue = iter(writes)

        async def worker():
            for path, data, version in queue:
                (stat,) = await self.zk.multi([SetData(path, data, version)], self.epoch_version)
                self.versions[path] = stat.version

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return time.perf_counter() - start

    async def pipelined(self) -> float:
        writes = self.next_writes()
        start = time.perf_counter()
        stats = await asyncio.gather(*(self.zk.set(path, data, version) for path, data, version in writes))
        for (path, _, _), stat in zip(writes, stats):
            self.versions[path] = stat.version
        return time.perf_counter() - start

    async def batched(self, chunk_ops: int) -> float:
        writes = self.next_writes()
        start = time.perf_counter()
        versions, conflicts = await self.zk.write_partition_states(self.epoch_version, writes, chunk_ops=chunk_ops)
        elapsed = time.perf_counter() - start
        assert not conflicts and len(versions) == len(writes)
        self.versions.update(versions)
        return elapsed

    async def raw_aiozk(self, connect_string: str, chunk: int | None) -> float:
        """The bare aiozk client: pipelined sets (chunk None) or `chunk`-op transactions."""

        hosts, chroot = parse_connect_string(connect_string)
        client = aiozk.ZKClient(hosts, chroot=chroot, session_timeout=10)
        await client.start()
        writes = self.next_writes()
        try:
            start = time.perf_counter()
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
            return time.perf_counter() - start
        finally:
            await client.close()

    async def reads(self, batch: int | None = None) -> float:
        start = time.perf_counter()
        if batch is None:
            got = await self.zk.get_many(self.paths)
        else:  # the same reads without multiRead (what a client for ZooKeeper < 3.6 does)
            got = await self.zk._read_many(zk_module._GET_DATA, self.paths, zk_module.READ_WINDOW, batch=batch)
        elapsed = time.perf_counter() - start
        assert len(got) == len(self.paths) and all(v is not None for v in got.values())
        return elapsed


async def run(connect_string: str, partitions: int, reads: int, chunk_sizes: list[int], runs: int) -> list[dict]:
    chroot = f"/bench-{uuid.uuid4().hex[:8]}"
    zk = await ZkSession.connect(connect_string + chroot, session_timeout_ms=30000)
    rows = []

    def row(name: str, ops: int, seconds: list[float], note: str = ""):
        median = statistics.median(seconds)
        rows.append({"name": name, "ops": ops, "runs": len(seconds), "median_s": median,
                     "ops_per_s": ops / median, "min_s": min(seconds), "max_s": max(seconds), "note": note})
        print(f"  {name:<40} {ops:>7} {median:8.3f} s {ops / median:>10,.0f} ops/s"
              f"   ({min(seconds):.3f}-{max(seconds):.3f} s) {note}", flush=True)

    try:
        bench = Bench(zk, state_paths(partitions))
        print(f"  {'':<40} {'ops':>7} {'median':>10} {'rate':>16}   (min-max over {runs} runs)")
        row("create (write_partition_states)", partitions, [await bench.create_all()],
            f"+ {partitions // PER_TOPIC * (PER_TOPIC + 1)} parents, 1 run")
        measured: dict[str, list[float]] = collections.defaultdict(list)
        for _ in range(runs):  # interleaved, so JIT warm-up and machine noise hit every method
            measured["sequential conditional sets (await each)"].append(await bench.sequential())
            measured["kafka 2.x: multi(check+set) x10 in flight"].append(await bench.kafka_multi())
            measured["pipelined conditional sets"].append(await bench.pipelined())
            measured["raw aiozk: pipelined sets"].append(await bench.raw_aiozk(connect_string + chroot, None))
            measured["raw aiozk: 100-op transactions"].append(await bench.raw_aiozk(connect_string + chroot, 100))
            for size in chunk_sizes:
                measured[f"write_partition_states chunk={size}"].append(await bench.batched(size))
            measured["get_many (multiRead)"].append(await bench.reads())
            measured["get_many, one request per read"].append(await bench.reads(batch=1))
        for name, seconds in measured.items():
            row(name, partitions, seconds)
        if reads > partitions:
            big = Bench(zk, state_paths(reads, prefix="read"))
            row("create (write_partition_states)", reads, [await big_create(big)], "unfenced, for the read test")
            row("get_many (multiRead)", reads, [await big.reads() for _ in range(runs)])
            row("get_many, one request per read", reads, [await big.reads(batch=1)])
    finally:
        await zk.delete_recursive("/")
        await zk.close()
    return rows


async def big_create(bench: Bench) -> float:
    start = time.perf_counter()
    versions, conflicts = await bench.zk.write_partition_states(None, bench.next_writes())
    bench.versions.update(versions)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--reads", type=int, default=100_000)
    parser.add_argument("--chunks", default="50,100,200,500,1000,2000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--zookeeper", help="an existing ZooKeeper (default: start the embedded one)")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    chunk_sizes = [int(c) for c in args.chunks.split(",") if c]
    server = data_dir = None
    connect_string = args.zookeeper
    if not connect_string:
        data_dir = tempfile.mkdtemp(prefix="kctl-bench-zk-")
        server = EmbeddedZooKeeper(data_dir).start()
        connect_string = server.connect_string
        print(f"embedded ZooKeeper {server.version()} at {connect_string}")
    try:
        rows = asyncio.run(run(connect_string, args.partitions, args.reads, chunk_sizes, args.runs))
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
