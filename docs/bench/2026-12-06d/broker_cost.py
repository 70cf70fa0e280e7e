"""Time one broker applying a 10,000-partition cluster's LeaderAndIsr (its 7,500 replicas) and
UpdateMetadata, as after a controller failover (same epochs again: all stale) and after a
broker failure (new epochs)."""
import asyncio, time, cProfile, pstats, sys
import orjson
from adapters.broker.broker import Broker
from adapters.control import requests as Q
from controller_core.values import PartitionView, TopicPartition, BrokerInfo

N = 10_000
ME = 1
brokers = [BrokerInfo(b, "h", 9000 + b, 10 + b, None) for b in (1, 2, 3, 4)]

def views(epoch, for_me):
    out = []
    for i in range(N):
        reps = tuple(((i + k) % 4) + 1 for k in range(3))
        if for_me and ME not in reps:
            continue
        out.append(PartitionView(TopicPartition(f"t{i // 10}", i % 10), reps[0], epoch, reps, 1, epoch, reps, (), (), False))
    return out

def body(views_, api):
    header = {"controller_id": 2, "controller_epoch": 1, "broker_epoch": -1,
              ("live_leaders" if api == Q.LEADER_AND_ISR else "live_brokers"): [Q._broker(b) for b in brokers]}
    return orjson.loads(Q.spliced_body(header, Q.states_json(views_)).data)

async def main():
    b = Broker(ME, None)
    lai0, um0 = body(views(0, True), Q.LEADER_AND_ISR), body(views(0, False), Q.UPDATE_METADATA)
    lai1 = body(views(1, True), Q.LEADER_AND_ISR)
    await b.handle(type("F", (), {"api": Q.LEADER_AND_ISR, "body": lai0})())
    await b.handle(type("F", (), {"api": Q.UPDATE_METADATA, "body": um0})())
    for name, api, bd in (("failover LAI (stale)", Q.LEADER_AND_ISR, lai0), ("UM 10k", Q.UPDATE_METADATA, um0),
                          ("new-epoch LAI", Q.LEADER_AND_ISR, lai1)):
        t = time.process_time(); w = time.perf_counter()
        ans = await b.handle(type("F", (), {"api": api, "body": bd})())
        print(f"{name}: cpu {1000*(time.process_time()-t):.1f} ms wall {1000*(time.perf_counter()-w):.1f} ms errors {len(ans.get('partition_errors', []))}")
    if "-p" in sys.argv:
        pr = cProfile.Profile(); pr.enable()
        await b.handle(type("F", (), {"api": Q.UPDATE_METADATA, "body": um0})())
        await b.handle(type("F", (), {"api": Q.LEADER_AND_ISR, "body": body(views(2, True), Q.LEADER_AND_ISR)})())
        pr.disable(); pstats.Stats(pr).sort_stats("cumulative").print_stats(18)
asyncio.run(main())
