"""The simulated replica manager of an earlier commit against the current one, driven through
the same random lives (LeaderAndIsr as leader or follower, UpdateMetadata's live brokers and
offline replicas, StopReplica, ISR proposals committed or failed, a fake clock): the same
replicas, followers (fetching, since), due times and proposals at every step. Written to check
the dawn change of 2026-11-28 (a follower's refresh without sets) against 51660e3's module.

    git show 51660e3:adapters/broker/replica_manager.py > /tmp/old_rm.py
    PYTHONPATH=.:/tmp python docs/bench/2026-11-28-dawn/replica_manager_equivalence.py
"""
import random
import old_rm
from adapters.broker import replica_manager as new_rm
from controller_core.values import PartitionView, TopicPartition
def run(seed):
    rng = random.Random(seed)
    t = [0.0]
    clock = lambda: t[0]
    a = old_rm.SimulatedReplicaManager(1, clock=clock, catch_up_delay_ms=100, replica_lag_time_max_ms=300)
    b = new_rm.SimulatedReplicaManager(1, clock=clock, catch_up_delay_ms=100, replica_lag_time_max_ms=300)
    epochs = {}
    for step in range(300):
        t[0] += rng.choice([0, 10, 50, 150, 400])
        op = rng.random()
        tp = TopicPartition("t", rng.randrange(6))
        if op < 0.35:
            reps = tuple(rng.sample(range(1, 6), rng.randint(1, 4)))
            if 1 not in reps and rng.random() < 0.7: reps = (1,) + reps[:3]
            isr = tuple(x for x in reps if rng.random() < 0.7) or reps[:1]
            if rng.random() < 0.2: isr = isr + (6,)
            epochs[tp] = epochs.get(tp, 0) + 1
            leader = 1 if rng.random() < 0.5 else rng.choice(reps)
            v = PartitionView(tp, leader, epochs[tp], isr, 1, rng.randrange(5), reps)
            for m in (a, b):
                (m.become_leader if leader == 1 else m.become_follower)(v)
        elif op < 0.7:
            live = frozenset(x for x in range(1, 7) if rng.random() < 0.7) | {1}
            for m in (a, b): m.update_live_brokers(live)
        elif op < 0.75:
            d = rng.random() < 0.5
            for m in (a, b): m.stop_replica(tp, d)
        elif op < 0.9:
            pa, pb = a.isr_proposals(), b.isr_proposals()
            assert [(p.tp, p.leader_isr, p.added, p.removed) for p in pa] == [(p.tp, p.leader_isr, p.added, p.removed) for p in pb], (seed, step)
            for p in pa:
                r = rng.random()
                for m in (a, b):
                    q = p if m is a else pb[pa.index(p)]
                    if r < 0.6: m.isr_committed(q, q.leader_isr.zk_version + 1)
                    elif r < 0.8: m.isr_write_failed(q)
        else:
            off = {tp: frozenset(x for x in range(2, 6) if rng.random() < 0.3)}
            for m in (a, b): m.update_offline_replicas([tp], off)
        assert {k: v.to_json() for k, v in a.partitions().items()} == {k: v.to_json() for k, v in b.partitions().items()}, (seed, step)
        assert a._due == b._due, (seed, step)
        assert a.next_isr_deadline() == b.next_isr_deadline()
        fa = {tp: {k: (f.fetching, f.since) for k, f in r.followers.items()} for tp, r in a._replicas.items()}
        fb = {tp: {k: (f.fetching, f.since) for k, f in r.followers.items()} for tp, r in b._replicas.items()}
        for k in fa:
            assert fa[k] == fb[k], (seed, step, k, fa[k], fb[k], a._replicas[k].role, a._replicas[k].replicas, a._replicas[k].isr)
for seed in range(400): run(seed)
print("equivalent on 400 random lives")
