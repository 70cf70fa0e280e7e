"""A broker holding 100,000 partitions applies a broker failure's requests (broker 1 dies).

Broker 2 (a `Broker` with the simulated replica manager, in this process, no ZooKeeper) is given
a new controller's UpdateMetadata and LeaderAndIsr as they come off the wire (JSON round trip),
is left quiet for 1.5 s (a grown broker freezes what it holds then), and then applies the
LeaderAndIsr and UpdateMetadata a broker failure's release sends it. Prints each request's time,
the wall and CPU total. From the repository's root:

    .venv/bin/python docs/bench/2026-11-28-late-morning/broker_failure_apply.py [PARTITIONS]

Run on e229285 (before the broker's collector handling) and be6b2cb (after) for the A/B.
"""
import asyncio, gc, sys, time
import orjson
from benchmarks.core_step import snapshot_event, settle
from controller_core import events as E
from controller_core.step import step
from controller_core.state import initial_state, ControllerConfig
from adapters.control import requests as Q
from adapters.broker.broker import Broker
N = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
config = ControllerConfig(broker_id=5, auto_leader_rebalance_enable=False)
st, cmds = step(initial_state(config), snapshot_event(N, (1,2,3,4,5), 1, 100))
def pick(cmds, kind, b):
    return next(c for c in cmds if type(c).__name__ == kind and c.broker_id == b)
wire = lambda body: orjson.loads(orjson.dumps(body))
load = [(Q.UPDATE_METADATA, wire(Q.update_metadata_body(pick(cmds, "SendUpdateMetadata", 2), 5))),
        (Q.LEADER_AND_ISR, wire(Q.leader_and_isr_body(pick(cmds, "SendLeaderAndIsr", 2), 5)))]
state = settle(st, cmds)
after, c1 = step(state, E.BrokersChanged(at=1, brokers=tuple(state.brokers[b] for b in (2,3,4,5))))
w = next(c for c in c1 if type(c).__name__ == "WritePartitionStates")
_, c2 = step(after, E.PartitionStatesWritten(at=1, write_id=w.write_id, versions=tuple((x.tp, x.leader_isr.zk_version) for x in w.writes)))
fail = [(Q.LEADER_AND_ISR, wire(Q.leader_and_isr_body(pick(c2, "SendLeaderAndIsr", 2), 5))),
        (Q.UPDATE_METADATA, wire(Q.update_metadata_body(pick(c2, "SendUpdateMetadata", 2), 5)))]
del st, cmds, state, after, c1, c2
F = lambda api, body: type("F", (), {"api": api, "body": body})()
async def main():
    b = Broker(2, None); b.set_broker_epoch(102)
    for api, body in load: await b.handle(F(api, body))
    await asyncio.sleep(1.5)  # a broker is quiet between its load and the failure
    t0 = time.perf_counter(); c0 = time.process_time()
    out = []
    for api, body in fail:
        t = time.perf_counter(); await b.handle(F(api, body)); out.append((time.perf_counter() - t) * 1000)
    print(f"failure's LAI ({len(fail[0][1]['partition_states']['topics'])} topics) {out[0]:.0f} ms, UM {out[1]:.0f} ms, "
          f"total {(time.perf_counter()-t0)*1000:.0f} ms wall, {(time.process_time()-c0)*1000:.0f} ms CPU, gc count {gc.get_count()}")
    b.close()
asyncio.run(main())
