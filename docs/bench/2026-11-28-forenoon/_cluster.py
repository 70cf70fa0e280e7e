"""A cluster of argv[1] partitions (default 10,000), all led by broker 1, and the BrokersChanged that
loses broker 1 (`ev`), as `benchmarks.core_step` builds them; exec'd by the A/B scripts here."""
import sys
from benchmarks.core_step import cluster, tune_gc, AT
from controller_core import events as E
from controller_core.step import step
n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
state = cluster(n); tune_gc()
ev = E.BrokersChanged(at=AT, brokers=tuple(state.brokers[b] for b in (2, 3, 4, 5)))
step(state, ev)
