"""ControllerElected's step() in CPU time at 10,000 and 100,000 partitions, on a snapshot whose
equal assignments are one value (as the ZooKeeper reader and the journal codec give them), built
here so that an older tree (whose benchmarks/core_step.py built one value per partition) is
measured on the same input. Run from the repository root with PYTHONPATH=. (or the other tree)."""
import statistics
import time

from controller_core import events as E
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import BrokerInfo, LeaderIsr, TopicPartition, shared_assignment


def snapshot_event(n_partitions, brokers=(1, 2, 3, 4, 5), per_topic=100):
    n = len(brokers)
    topics, states = [], []
    for t in range(n_partitions // per_topic):
        name = f"topic-{t:05d}"
        parts = []
        for p in range(per_topic):
            i = t * per_topic + p
            replicas = tuple(brokers[(i + k) % n] for k in range(3))
            parts.append((p, shared_assignment(replicas)))
            states.append((TopicPartition(name, p), LeaderIsr(replicas[0], 0, replicas, 1, 0)))
        topics.append((name, tuple(parts)))
    snap = E.ClusterSnapshot(brokers=tuple(BrokerInfo(b, "127.0.0.1", 9090 + b, 100 + b) for b in brokers),
                             topics=tuple(topics), partition_states=tuple(states))
    return E.ControllerElected(at=1_700_000_000_000, epoch=2, epoch_zk_version=1, snapshot=snap)


def main():
    config = ControllerConfig(broker_id=5, auto_leader_rebalance_enable=False)
    out = []
    for n in (10_000, 100_000):
        ev = snapshot_event(n)
        base = initial_state(config)
        ts = []
        for _ in range(15 if n == 10_000 else 9):
            t = time.process_time()
            step(base, ev)
            ts.append((time.process_time() - t) * 1e3)
        out.append(f"{n}: {statistics.median(ts):.1f} ({' '.join(f'{x:.0f}' for x in ts)})")
    print(" | ".join(out))


if __name__ == "__main__":
    main()
