"""A broker applying a 10,000-partition LeaderAndIsr (it leads a third, follows the rest) and a
10,000-partition UpdateMetadata, in-process, without ZooKeeper: where its CPU goes."""
import asyncio, cProfile, pstats, sys, time
import orjson
from controller_core.values import PartitionView, TopicPartition, BrokerInfo
from adapters.control import requests as Q
from adapters.broker.broker import Broker
N = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
views = tuple(PartitionView(TopicPartition(f"t{i // 100}", i % 100), 2 + (i % 3), 5, (2, 3, 4), 1, 3, (2, 3, 4)) for i in range(N))
brokers = tuple(BrokerInfo(b, "127.0.0.1", 9000 + b, 10 + b) for b in range(1, 6))
body_li = orjson.loads(orjson.dumps({"controller_id": 5, "controller_epoch": 1, "broker_epoch": -1, "partition_states": Q.views_body(views)}))
body_um = orjson.loads(orjson.dumps({"controller_id": 5, "controller_epoch": 1, "broker_epoch": -1, "partition_states": Q.views_body(views),
    "live_brokers": [Q._broker(b) for b in brokers]}))
async def main():
    for rep in range(3):
        b = Broker(2, None)
        prof = cProfile.Profile() if rep == 2 else None
        t0 = time.perf_counter()
        if prof: prof.enable()
        a1 = await b._leader_and_isr(dict(body_li))
        t1 = time.perf_counter()
        await b._update_metadata(dict(body_um))
        if prof: prof.disable()
        t2 = time.perf_counter()
        print(f"rep {rep}: LeaderAndIsr {1000*(t1-t0):.1f} ms, UpdateMetadata {1000*(t2-t1):.1f} ms, errors {len(a1['partition_errors'])}")
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)
asyncio.run(main())
