"""The failover benchmark's floors: the ZooKeeper work of one failover with no controller at all.

Every floor works in a tree of its own (`FloorTree`): `/controller_epoch` and N partition-state
znodes `/s/<i // 100>/<i % 100>` (100 to a parent, as the benchmark's topics), each at version 0.
A write pass sets every state with the version check the controller makes, behind a check of
`/controller_epoch`'s version; a read pass (controller-failover) reads every state. The first
pass of each floor warms its client up (the product is warm too: it created the cluster first)
and is not reported; the Java floor warms up over at least `JIT_WARMUP_OPS` operations.

- `zk-floor`: the product's own multi-op frames (chunks of `DEFAULT_CHUNK_OPS` setData behind the
  epoch check, under `MAX_CHUNK_BYTES`; reads in multiRead requests of `MULTI_READ_OPS`, as many
  in flight as `ZkSession.get_many` allows), encoded before t0 and sent over the product's
  connection code (adapters/zookeeper/connection.py) with the product's concurrency: the least the
  product's Python client can take for this work.
- `java-floor`: the same requests, batches and concurrency from ZooKeeper's own Java client
  (benchmarks/java/Floor.java, compiled at run time against the jars in the pyspark wheel),
  timed inside the JVM: the limit of the server on this machine. Absent (with the reason) where
  no JDK is found.
- `aiozk-reference`: the old floor, kept as a named reference: aiozk's high-level
  `begin_transaction()` with the same chunk size (reads: one `get_data` per state, all at once).
  It is not a floor: the product's write path is faster than it.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from adapters.znodes import codec as zkdata
from adapters.zookeeper.session import DEFAULT_CHUNK_OPS, MAX_CHUNK_BYTES, MULTI_READ_OPS, ZkSession, _chunks, parse_connect_string
from adapters.zookeeper.connection import READ_WINDOW
from adapters.zookeeper.values import CONTROLLER_EPOCH_PATH
from benchmarks.meters import PeakRss
from adapters.zookeeper.wire import (_CHECK, _GET_DATA, _INT, _MULTI, _MULTI_HEADER, _MULTI_READ, _SET_DATA, _buffer,
                             _OpError, _Request, _ustr)
from controller_core.values import LeaderIsr
from adapters.zookeeper.server import EmbeddedZooKeeperError, zookeeper_classpath
import aiozk
import re

PER_PARENT = 100
READ_REQUESTS_IN_FLIGHT = max(1, READ_WINDOW // MULTI_READ_OPS)
"""multiRead requests in flight in `ZkSession.get_many` (its window is counted in reads)."""
EPOCH_DATA = b"7"


def state_bytes() -> bytes:
    """What every pass writes: a partition state after a leader change, as the controller
    encodes it."""
    return zkdata.encode_partition_state(LeaderIsr(2, 1, (2, 3), 8, 0))


class FloorTree:
    """A chroot holding `/controller_epoch` and `partitions` states at version 0; `connect` is
    its connect string. Deleted on exit."""

    def __init__(self, connect: str, partitions: int):
        hosts, chroot = parse_connect_string(connect)
        self.hosts = hosts
        self.root = (chroot or "") + f"/floor-{os.getpid()}-{time.monotonic_ns()}"
        self.connect = f"{hosts}{self.root}"
        self.partitions = partitions
        self.paths = [f"/s/{i // PER_PARENT}/{i % PER_PARENT}" for i in range(partitions)]
        self.epoch_version = 0
        self.zk: ZkSession | None = None

    async def __aenter__(self) -> "FloorTree":
        zk = self.zk = await ZkSession.connect(self.connect, session_timeout_ms=30000)
        await zk.create(CONTROLLER_EPOCH_PATH, EPOCH_DATA)
        initial = zkdata.encode_partition_state(LeaderIsr(1, 0, (1, 2, 3), 7, 0))
        # creates the parents too
        versions, conflicts = await zk.write_partition_states(None, [(p, initial, -1) for p in self.paths])
        if conflicts or len(versions) != self.partitions:
            raise RuntimeError(f"the floor's tree could not be created ({len(conflicts)} conflicts)")
        return self

    async def __aexit__(self, *exc_info) -> None:
        try:
            await self.zk.delete_recursive("/")
        finally:
            await self.zk.close()


def _sample(total_ms: float, phases: tuple[str, ...], cpu: dict | None, peak_rss_mb: float | None) -> dict:
    # a floor has one phase: its requests (the reads, in controller-failover)
    out = {"total_ms": total_ms, "phases_ms": {p: (total_ms if p == "zk_writes" else 0.0) for p in phases}}
    if cpu is not None:
        out["cpu"] = cpu
    if peak_rss_mb is not None:
        out["peak_rss_mb"] = peak_rss_mb
    return out


# -- zk-floor: the product's frames over the product's connection --------------------------------------


def write_frames(zk: ZkSession, paths: list[str], data: bytes, version: int, epoch_version: int) -> list[_Request]:
    """The requests `ZkSession.write_partition_states` sends for these writes, encoded now."""
    head = _MULTI_HEADER.pack(_CHECK, False, -1) + _ustr(zk._abs(CONTROLLER_EPOCH_PATH)) + _INT.pack(epoch_version)
    done = _MULTI_HEADER.pack(-1, True, -1)
    op = _MULTI_HEADER.pack(_SET_DATA, False, -1)
    tail = _buffer(data) + _INT.pack(version)
    requests = []
    for chunk in _chunks(((p, (data, version)) for p in paths), DEFAULT_CHUNK_OPS, MAX_CHUNK_BYTES):
        body = head + b"".join(op + _ustr(zk._abs(path)) + tail for path, _ in chunk) + done
        requests.append(_Request(_MULTI, body, True, None))
    return requests


def read_frames(zk: ZkSession, paths: list[str]) -> list[_Request]:
    """The multiRead requests `ZkSession.get_many` sends for these paths, encoded now."""
    op = _MULTI_HEADER.pack(_GET_DATA, False, -1)
    done = _MULTI_HEADER.pack(-1, True, -1)
    return [_Request(_MULTI_READ, b"".join(op + _ustr(zk._abs(p)) + b"\x00" for p in paths[i:i + MULTI_READ_OPS]) + done,
                     False, None)
            for i in range(0, len(paths), MULTI_READ_OPS)]


def _check(results: list, what: str) -> None:
    for result in results:
        if isinstance(result, BaseException):
            raise RuntimeError(f"{what}: {result!r}")
        for item in result:
            if isinstance(item, _OpError) and item.code not in (0, -2):
                raise RuntimeError(f"{what}: an operation failed with ZooKeeper error {item.code}")


async def zk_floor(connect: str, partitions: int, reads: bool, runs: int, meter, phases) -> list[dict]:
    async with FloorTree(connect, partitions) as tree:
        zk = tree.zk
        session = zk._session
        data = state_bytes()
        samples = []
        for version in range(runs + 1):  # pass 0 warms up
            requests = read_frames(zk, tree.paths) if reads else write_frames(zk, tree.paths, data, version,
                                                                              tree.epoch_version)
            rss = PeakRss()
            meter.start()
            t0 = time.perf_counter()
            if reads:
                results = await session.send_many(requests, session.generation, READ_REQUESTS_IN_FLIGHT)
            else:
                results = await asyncio.gather(
                    *(session.send(r, session.generation, retry_in_flight=False) for r in requests),
                    return_exceptions=True)
            total = (time.perf_counter() - t0) * 1000
            cpu = meter.stop()
            _check(results, "zk-floor")
            if version:
                samples.append(_sample(total, phases, cpu, rss.peak_mb()))
        return samples


WARM_UP_OPS = 100_000
"""Writes and reads of partition states that warm a ZooKeeper server up before the first
measured run (`warm_up`): on this machine a fresh server's JIT spends about 3 s of CPU over its
first ~100,000 of each (at 10,000 partitions a write pass took 76-120 ms at first, 38-43 ms
after 90,000 writes and 90,000 reads, and the compiler threads went quiet)."""
WARM_UP_PASSES_MAX = 50


async def warm_up(connect: str, partitions: int, ops: int = WARM_UP_OPS) -> dict:
    """Write and read `partitions` states, alternately, until `ops` of each are done, in a tree
    of their own (deleted after): the work of a failover, so that the server's JIT has compiled
    it before any mode is measured, as in an ensemble that has been up for a while. Without it
    the first mode measured ran on a cold server and the floors, measured later, on a warm one.
    Returns the passes and the first and last write pass's milliseconds. (At most
    `WARM_UP_PASSES_MAX` passes: a small cluster's whole run lasts milliseconds.)"""
    passes = min(WARM_UP_PASSES_MAX, max(2, -(-ops // max(1, partitions))))
    async with FloorTree(connect, partitions) as tree:
        zk = tree.zk
        session = zk._session
        data = state_bytes()
        writes_ms = []
        t_start = time.perf_counter()
        for version in range(passes):
            t0 = time.perf_counter()
            results = await asyncio.gather(
                *(session.send(r, session.generation, retry_in_flight=False)
                  for r in write_frames(zk, tree.paths, data, version, tree.epoch_version)),
                return_exceptions=True)
            writes_ms.append((time.perf_counter() - t0) * 1000)
            _check(results, "warm-up")
            _check(await session.send_many(read_frames(zk, tree.paths), session.generation,
                                           READ_REQUESTS_IN_FLIGHT), "warm-up")
    return {"passes": passes, "ops_each": passes * partitions, "seconds": round(time.perf_counter() - t_start, 2),
            "first_write_ms": round(writes_ms[0], 1), "last_write_ms": round(writes_ms[-1], 1)}


# -- aiozk-reference: aiozk's high-level client --------------------------------------------------------


async def aiozk_reference(connect: str, partitions: int, reads: bool, runs: int, meter, phases) -> list[dict]:


    async with FloorTree(connect, partitions) as tree:
        client = aiozk.ZKClient(tree.hosts, chroot=tree.root)
        await client.start()
        try:
            data = state_bytes()
            samples = []
            for version in range(runs + 1):
                rss = PeakRss()
                meter.start()
                t0 = time.perf_counter()
                if reads:
                    await asyncio.gather(*(client.get_data(p) for p in tree.paths))
                else:
                    async def one(batch, version=version):
                        txn = client.begin_transaction()
                        txn.check_version(CONTROLLER_EPOCH_PATH, tree.epoch_version)
                        for p in batch:
                            txn.set_data(p, data, version)
                        if not await txn.commit():
                            raise RuntimeError("aiozk-reference: a transaction failed")
                    await asyncio.gather(*(one(tree.paths[i:i + DEFAULT_CHUNK_OPS])
                                           for i in range(0, partitions, DEFAULT_CHUNK_OPS)))
                total = (time.perf_counter() - t0) * 1000
                cpu = meter.stop()
                if version:
                    samples.append(_sample(total, phases, cpu, rss.peak_mb()))
            return samples
        finally:
            await client.close()


# -- java-floor: ZooKeeper's own Java client -----------------------------------------------------------


JAVA_SOURCE = Path(__file__).parent / "java" / "Floor.java"
JVM_FLAGS = ("-Xms64m", "-Xmx1g", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true")


JIT_WARMUP_OPS = 20_000
"""The Java floor's warm-up passes cover at least this many operations (at most 20 passes): its
JIT compiles the client's hot paths after some thousands of calls, and a controller's client
has long been warm when a failover comes."""


def java_warmups(partitions: int) -> int:
    return min(20, max(1, -(-JIT_WARMUP_OPS // partitions)))


class JavaFloorAbsent(Exception):
    """No way to run the Java floor here; the message says why."""


class JavaFloor:
    """Compiles benchmarks/java/Floor.java once (javac, or the source launcher of Java 11+) and
    runs it per scenario."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        try:
            self.classpath = zookeeper_classpath()
        except EmbeddedZooKeeperError as exc:
            raise JavaFloorAbsent(str(exc)) from None
        java_home = os.environ.get("JAVA_HOME")
        self.java = (shutil.which("java", path=str(Path(java_home) / "bin")) if java_home else None) or shutil.which("java")
        javac = (shutil.which("javac", path=str(Path(java_home) / "bin")) if java_home else None) or shutil.which("javac")
        if self.java is None:
            raise JavaFloorAbsent("no `java` on PATH (or in $JAVA_HOME/bin)")
        if javac is not None:
            classes = workdir / "java-floor-classes"
            classes.mkdir(parents=True, exist_ok=True)
            done = subprocess.run([javac, "-nowarn", "-cp", self.classpath, "-d", str(classes), str(JAVA_SOURCE)],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise JavaFloorAbsent(f"javac failed on {JAVA_SOURCE.name}: {done.stderr.strip()[-500:]}")
            self.command = [self.java, *JVM_FLAGS, "-cp", f"{classes}{os.pathsep}{self.classpath}", "Floor"]
            self.how = "javac"
        else:
            version = subprocess.run([self.java, "-version"], capture_output=True, text=True).stderr
            major = _java_major(version)
            if major is None or major < 11:
                raise JavaFloorAbsent(f"no `javac`, and `java` ({version.splitlines()[0] if version else '?'}) "
                                      "is older than 11, which has no source launcher")
            self.command = [self.java, *JVM_FLAGS, "-cp", self.classpath, str(JAVA_SOURCE)]
            self.how = "source launcher"

    async def run(self, connect: str, partitions: int, reads: bool, runs: int, zk_pid: int | None,
                  phases) -> list[dict]:
        async with FloorTree(connect, partitions) as tree:
            data_file = self.workdir / f"java-floor-{os.getpid()}.state"
            data_file.write_bytes(state_bytes())
            chunk = MULTI_READ_OPS if reads else DEFAULT_CHUNK_OPS
            # writes: every chunk at once, as write_partition_states sends them
            window = READ_REQUESTS_IN_FLIGHT if reads else (partitions + chunk - 1) // chunk
            warmups = java_warmups(partitions)
            args = [tree.connect, "read" if reads else "write", str(partitions), str(chunk), str(window),
                    str(tree.epoch_version), str(warmups), str(runs), str(zk_pid or 0), str(data_file)]
            proc = await asyncio.create_subprocess_exec(*self.command, *args, stdout=subprocess.PIPE,
                                                        stderr=subprocess.PIPE)
            try:
                out, err = await asyncio.wait_for(proc.communicate(), 900)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
                raise RuntimeError("java-floor took longer than 15 minutes") from None
            if proc.returncode != 0:
                raise RuntimeError(f"java-floor exited {proc.returncode}: {err.decode(errors='replace').strip()[-800:]}")
            passes = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
            measured = [p for p in passes if not p["warmup"]]
            if len(measured) != runs:
                raise RuntimeError(f"java-floor reported {len(measured)} measured passes, expected {runs}")
            samples = []
            for p in measured:
                jvm, server = p["cpu_ms"], p["zookeeper_cpu_ms"]
                server = None if server < 0 or not zk_pid else server
                cpu = {"controller_process_ms": jvm, "zookeeper_ms": server, "brokers_ms": 0.0,
                       "total_ms": jvm + (server or 0)}
                wall = p["total_ms"]
                cpu["cores_busy"] = round(cpu["total_ms"] / ((os.cpu_count() or 1) * wall), 3) if wall > 0 else 0.0
                rss = p["peak_rss_kb"] / 1024 if p["peak_rss_kb"] > 0 else None
                samples.append(_sample(wall, phases, cpu, rss))
            return samples


def _java_major(version_text: str) -> int | None:
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_text or "")
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major
