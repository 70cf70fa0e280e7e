"""ControllerElected's step() in CPU time at 10,000 and 100,000 partitions, on a snapshot whose
equal assignments are one value (as the ZooKeeper reader and the journal codec give them):
`benchmarks.core_step.snapshot_event`'s, its assignments shared here, so that an older tree
(whose snapshot had one value per partition) is measured on the same input. Run from the
repository root with PYTHONPATH=. (or the other tree)."""
import statistics
import time

import attrs

from benchmarks.core_step import snapshot_event as _snapshot_event
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import shared_assignment


def snapshot_event(n_partitions):
    event = _snapshot_event(n_partitions)
    snap = event.snapshot
    topics = tuple((t, tuple((p, shared_assignment(ra.replicas, ra.adding, ra.removing)) for p, ra in parts))
                   for t, parts in snap.topics)
    return attrs.evolve(event, snapshot=attrs.evolve(snap, topics=topics))


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
