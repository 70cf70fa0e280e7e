"""`kctl chaos`: the seeded chaos soak, under random faults and admin work.

A cluster of real `kctl node` processes on a real ZooKeeper, each node connected to ZooKeeper
through a proxy of its own (adapters/sim/tcpproxy.py), while faults are injected at random and admin
work runs through the same code as `kctl topics`, `kctl reassign-partitions` and
`kctl leader-election`. At the end everything is healed, the cluster is given time to settle,
and five checks decide the verdict. The parts:

- `config.py`: the run's settings (`ChaosConfig`) and the seeded random streams;
- `fleet.py`: ZooKeeper (embedded or given), the proxies and the node processes, and the
  low-level faults on them (kill, pause, expire, cut, restart) plus `heal_all()`;
- `faults.py`: the fault scheduler: which fault when, on whom, for how long;
- `workload.py`: the admin operations;
- `checks.py`: the end-of-run checks (ZooKeeper, the brokers' metadata, the journals' replay);
- `run.py`: the orchestration and the live line;
- `report.py`: the final tables, `chaos.json` and the figures read from the node logs.
"""
from adapters.sim.chaos.config import ChaosConfig
from adapters.sim.chaos.run import run_chaos

__all__ = ["ChaosConfig", "run_chaos"]
