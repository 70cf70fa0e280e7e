import asyncio, cProfile, pstats, time, orjson
from controller_core.values import PartitionView, TopicPartition, BrokerInfo
from adapters.control import requests as Q
from adapters.broker.broker import Broker
N = 10000
views = tuple(PartitionView(TopicPartition(f"t{i // 100}", i % 100), 2 + (i % 3), 5, (2, 3, 4), 1, 3, (2, 3, 4)) for i in range(N))
brokers = tuple(BrokerInfo(b, "127.0.0.1", 9000 + b, 10 + b) for b in range(1, 6))
raw = orjson.dumps({"controller_id": 5, "controller_epoch": 1, "broker_epoch": 12, "partition_states": Q.views_body(views), "live_brokers": [Q._broker(b) for b in brokers]})
print("body bytes", len(raw))
async def main():
    b = Broker(2, None)
    for rep in range(6):
        prof = cProfile.Profile() if rep == 5 else None
        t0 = time.perf_counter()
        if prof: prof.enable()
        body = orjson.loads(raw)
        t1 = time.perf_counter()
        await b._update_metadata(body)
        if prof: prof.disable()
        t2 = time.perf_counter()
        print(f"rep {rep}: loads {1000*(t1-t0):.1f} ms, UpdateMetadata {1000*(t2-t1):.1f} ms")
    pstats.Stats(prof).sort_stats("tottime").print_stats(14)
asyncio.run(main())
