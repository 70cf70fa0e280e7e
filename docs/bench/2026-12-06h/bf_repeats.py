"""The core benchmark's broker failure (benchmarks/core_step.py) at 100,000 partitions, each of seven
repetitions printed: how far one decision and its release vary in one process. NOGC=1 pauses
the cyclic collector, as the controller loop does during a burst. Unlike `core_step`, it leaves glibc's mmap
threshold at its default (no `adapters.runtime.heap.configure()`)."""
from benchmarks import core_step as cs
from controller_core.step import step
from controller_core import events as E
cs.bench_broker_failure(7, 10_000)
N = 100_000
state = cs.cluster(N)
cs.tune_gc()
import gc, os
if os.environ.get("NOGC"): gc.disable()
brokers = tuple(state.brokers[b] for b in (2, 3, 4, 5))
event = E.BrokersChanged(at=cs.AT, brokers=brokers)
print("decide", [round(x, 1) for x in cs.time_ms(lambda: step(state, event), 7)])
after, commands = step(state, event)
write = next(c for c in commands if type(c).__name__ == "WritePartitionStates")
outcome = E.PartitionStatesWritten(at=cs.AT, write_id=write.write_id,
                                   versions=tuple((w.tp, w.leader_isr.zk_version) for w in write.writes))
print("release", [round(x, 1) for x in cs.time_ms(lambda: step(after, outcome), 7)])
