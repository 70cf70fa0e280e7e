"""The digest of an ISR change, a 10,000-partition broker failure decision and its release: an old
digest.py (argv[1], e.g. `git show 5f61a4d:controller_core/digest.py > /tmp/old_digest.py`) against
this one, interleaved in one process; ROUNDS rounds (default 7). Asserts both equal the reference digest."""
import sys, time, statistics, importlib.util
sys.modules.setdefault("controller_core.old_digest", None)
spec = importlib.util.spec_from_file_location("controller_core.old_digest", sys.argv[1])
old = importlib.util.module_from_spec(spec); sys.modules["controller_core.old_digest"] = old; spec.loader.exec_module(old)
from controller_core import codec, digest as D
from adapters.journal.canonical import canonical
from benchmarks.core_step import cluster, tune_gc, AT
from controller_core import events as E
from controller_core.step import step
enc = lambda c, memo: codec._encode_top(c, codec._COMMANDS_BY_NAME, "a command", memo)
new_d = D.Digester(enc, canonical, codec._field_encoder); old_d = old.Digester(enc, canonical, codec._field_encoder)
state = cluster(10000, leader=None); tune_gc()
# an ISR change
tp, info = next(iter(state.partitions.items())) if hasattr(state.partitions, "items") else (None, None)
from controller_core.values import LeaderIsr
tp0 = state.partitions.tps(__import__("numpy").arange(1))[0] if hasattr(state.partitions, "tps") else None
p = state.partition(tp0)
li = p.leader_isr
new_li = LeaderIsr(li.leader, li.leader_epoch, li.isr[:2], li.controller_epoch, li.zk_version + 1)
ev = E.PartitionStatesObserved(at=AT, source="isr_change", states=((tp0, new_li),))
_, isr_cmds = step(state, ev)
ev2 = E.BrokersChanged(at=AT, brokers=tuple(state.brokers[b] for b in (2, 3, 4, 5)))
after, bf = step(state, ev2)
write = next(c for c in bf if type(c).__name__ == "WritePartitionStates")
_, rel = step(after, E.PartitionStatesWritten(at=AT, write_id=write.write_id, versions=tuple((w.tp, w.leader_isr.zk_version) for w in write.writes)))
for name, cmds, reps in (("isr", isr_cmds, 2000), ("decision", bf, 5), ("release", rel, 5)):
    assert new_d.digest(cmds) == old_d.digest(cmds) == codec.reference_digest(cmds)
    res = {"old": [], "new": []}
    for _ in range(int(__import__("os").environ.get("ROUNDS", "7"))):
        for k, d in (("old", old_d), ("new", new_d)):
            t = time.perf_counter()
            for _ in range(reps): d.digest(cmds)
            res[k].append((time.perf_counter() - t) / reps * 1e3)
    print(name, {k: round(statistics.median(v), 4) for k, v in res.items()}, "ms")
