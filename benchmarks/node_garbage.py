"""`python -m benchmarks.node_garbage [PARTITIONS]`: the cyclic garbage of in-process nodes
(issue 16; docs/notes/issue-16-cyclic-garbage.md).

Five nodes in this process on an embedded ZooKeeper (broker 5 the controller, broker 1 leading
every partition, RF 3, as in the failover benchmark); topics of 100 partitions created 50 at a
time; broker 1 crashed and its session expired; then broker 1 dropped, and the other four closed
and dropped. With the collector off and `gc.DEBUG_SAVEALL`, each phase prints what only the
cyclic collector would free (by type) and the reference cycles it forms (strongly connected
components of the garbage, by their members' types): what the failover benchmark's
`_freeze_grown_state` log line counts as "collected first".

The garbage of one phase is freed for real before the next (SAVEALL would keep it and the
next phase count it again). CPU only; a minute at 2,000 partitions.
"""
from __future__ import annotations

import asyncio
import collections
import gc
import logging
import sys
import tempfile
import time
import weakref
from pathlib import Path

from adapters.node import ClusterNode, NodeConfig
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.zookeeper.server import EmbeddedZooKeeper
from adapters.zookeeper.session import ZkSession, force_expire
from controller_core.values import ReplicaAssignment

SETTINGS = {"zookeeper.session.timeout.ms": "18000", "auto.leader.rebalance.enable": "false",
            "replica.catch.up.delay.ms": "200", "replica.lag.time.max.ms": "30000", "journal.fsync": "batch"}
PER_TOPIC, WINDOW, VICTIM, CONTROLLER = 100, 50, 1, 5


def _name(o) -> str:
    t = type(o).__name__
    if t == "function":
        return "fn " + o.__qualname__
    if t == "method":
        return "method " + o.__func__.__qualname__
    if t == "frame":
        return "frame " + o.f_code.co_name
    return type(o).__qualname__


def cycles(garbage: list) -> list[list[int]]:
    """The strongly connected components of the garbage graph with more than one member or a
    self-reference (Tarjan's algorithm, iterative)."""
    ids = {id(o): i for i, o in enumerate(garbage)}
    edges = [[ids[id(r)] for r in gc.get_referents(o) if id(r) in ids] for o in garbage]
    index: list = [None] * len(garbage)
    low = [0] * len(garbage)
    on_stack = [False] * len(garbage)
    stack: list[int] = []
    found: list[list[int]] = []
    counter = 0
    for root in range(len(garbage)):
        if index[root] is not None:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            for k in range(i, len(edges[v])):
                w = edges[v][k]
                if index[w] is None:
                    work += [(v, k + 1), (w, 0)]
                    break
                if on_stack[w]:
                    low[v] = min(low[v], index[w])
            else:
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack[w] = False
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1 or v in edges[v]:
                        found.append(comp)
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
    return found


def census(label: str, partitions: int) -> None:
    # the controller loop freezes its state on a large cluster (`_freeze_grown_state`): frozen
    # objects are invisible to a collection, dead or alive, until unfrozen
    gc.unfreeze()
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    garbage = list(gc.garbage)
    gc.garbage.clear()
    gc.set_debug(0)
    counts = collections.Counter(_name(o) for o in garbage)
    print(f"== {label}: {len(garbage)} objects ({len(garbage) / partitions:.1f} per partition)")
    print("   " + ", ".join(f"{n} {t}" for t, n in counts.most_common(10)))
    comps = sorted(cycles(garbage), key=len, reverse=True)
    held = sum(len(c) for c in comps)
    print(f"   {len(comps)} cycles of {held} objects; {len(garbage) - held} more hang off them")
    for comp in comps[:3]:
        members = collections.Counter(_name(garbage[i]) for i in comp)
        print(f"   cycle of {len(comp)}: " + ", ".join(f"{n} {t}" for t, n in members.most_common(8)))
    del garbage, comps
    gc.collect()  # freed for real: the next phase does not count it again


async def until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.05)


async def run(connect: str, base: Path, partitions: int) -> None:
    admin = await ZkSession.connect(connect)
    nodes: dict[int, ClusterNode] = {}
    for b in (CONTROLLER, 2, 3, 4, VICTIM):
        settings = {**SETTINGS, "process.roles": "broker,controller" if b == CONTROLLER else "broker"}
        nodes[b] = ClusterNode(NodeConfig(broker_id=b, zookeeper=connect, journal_dir=str(base / f"node-{b}"),
                                          settings=settings))
        await nodes[b].start()

    # the controller's node read through `nodes` each time, never held in a local: the census
    # after `nodes.clear()` must find no reference to it but the cycles it is looking for
    def ctrl() -> ClusterNode:
        return nodes[CONTROLLER]

    await until(lambda: ctrl().active and len(ctrl().loop.state.brokers) == 5, 60, "five brokers")
    gc.collect()

    creates = []
    for t in range((partitions + PER_TOPIC - 1) // PER_TOPIC):
        count = min(PER_TOPIC, partitions - t * PER_TOPIC)
        parts = {p: ReplicaAssignment((VICTIM, 2 + (t + p) % 4, 2 + (t + p + 1) % 4)) for p in range(count)}
        creates.append((zkpaths.topic(f"bench-{t:04d}"), zkdata.encode_topic_assignment(parts)))
    for i in range(0, len(creates), WINDOW):
        await asyncio.gather(*(admin.create(path, data) for path, data in creates[i:i + WINDOW]))

    def led_by_victim() -> int:
        return sum(1 for info in ctrl().loop.state.partitions.values()
                   if info.leader_isr is not None and info.leader_isr.leader == VICTIM)

    await until(lambda: led_by_victim() == partitions and not ctrl().loop.state.pending, 600, "partitions created")
    await asyncio.sleep(1)
    census(f"{partitions} partitions created", partitions)

    victim = nodes.pop(VICTIM)
    session_id, password = victim.zk.session_id, victim.zk.password
    await victim.crash()
    await force_expire(connect, session_id, password)
    await until(lambda: led_by_victim() == 0 and not ctrl().loop.state.pending, 300, "leaders moved")
    await victim.zk.close()
    await asyncio.sleep(1)
    census(f"broker {VICTIM} failed (crashed, session expired and closed)", partitions)
    alive = weakref.ref(victim)
    del victim
    census(f"broker {VICTIM} dropped", partitions)
    print(f"   broker {VICTIM}'s node {'is still alive (referenced)' if alive() is not None else 'is gone'}")

    for node in nodes.values():
        await node.close()
    await asyncio.sleep(1)
    census("the other four nodes closed", partitions)
    refs = [weakref.ref(n) for n in nodes.values()]
    nodes.clear()
    del node
    census("the other four nodes dropped", partitions)
    print(f"   {sum(r() is not None for r in refs)} of them still alive (referenced)")
    await admin.close()


def main() -> None:
    partitions = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    logging.basicConfig(level=logging.ERROR)
    gc.disable()  # nothing freed unseen; the nodes' own pauses keep it off (adapters/runtime/gcpause.py)
    base = Path(tempfile.mkdtemp(prefix="kctl-node-garbage-"))
    server = EmbeddedZooKeeper(base / "zookeeper")
    server.start()
    try:
        asyncio.run(run(server.connect_string, base, partitions))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
