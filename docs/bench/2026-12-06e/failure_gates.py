import sys, time
from benchmarks.sampled_units import sampled_units, fold
import controller_core.columnar_brokers as CB, controller_core.brokers as B
from controller_core import vector_election as V
from controller_core.columns import P_CODE
from controller_core.machines import PartitionState
import numpy as np
units = sampled_units(sys.argv[1], 10, seed=4)
orig = CB.on_broker_failure
def w(d, dead, last=False):
    image = d.partitions
    info = ""
    if not image.odd and image.count and not d.has_writes:
        present = image.column("present")
        if d.topics_to_delete: present = present & ~image.topic_mask(d.topics_to_delete)
        pstate = image.column("pstate"); leader = image.column("leader")
        leaderless = present & image.column("has_state") & ~V.member(leader[:, None], d.live)[:, 0] & (pstate != P_CODE[PartitionState.NEW])
        is_online = pstate == P_CODE[PartitionState.ONLINE]
        bad = present & ~is_online & ~(leaderless & (pstate == P_CODE[PartitionState.OFFLINE]))
        info = f"kept-in-elected={d.offline_dirs_among(image, leaderless)} waiting/odd-state={int(bad.sum())} leaderless={int(leaderless.sum())}"
    else:
        info = f"odd={image.odd} has_writes={d.has_writes}"
    r = orig(d, dead, last)
    print(r, d.cause, sorted(dead), len(d.replicas_on_offline_dirs), info)
    return r
B.columnar_brokers.on_broker_failure = w
for u in units: fold(u)
