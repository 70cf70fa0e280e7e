"""An all-topics Metadata answer (version 9) of a 10,000-partition broker cache, after each of a
failover's four partial releases replaced a quarter of the partitions' views: encoded whole, as
before 2026-11-28 05:36 (`codec.encode` of `metadata_response`), against each topic's kept
encoding (`metadata.TopicEncodings` and `codec.encode_spliced`). Both give the same bytes
(checked). CPU, medians of 20 answers.

    PYTHONPATH=. python docs/bench/2026-11-28-dawn/metadata_answer_ab.py
"""
import time, statistics
from adapters.kafka import metadata as M, codec
from controller_core.values import PartitionView, TopicPartition, BrokerInfo
N = 10000
pairs = [(a, b) for a in range(2, 6) for b in range(2, 6) if a != b]
views = {}
for i in range(N):
    tp = TopicPartition(f"topic-{i//100:05d}", i % 100)
    rs = (1, *pairs[i % len(pairs)])
    views[tp] = PartitionView(tp, rs[1], 1, rs[1:], 1, 1, rs)
brokers = {b: BrokerInfo(b, "127.0.0.1", 9090 + b, 100 + b) for b in range(2, 7)}
tps = list(views)
def answer(kept, cache, v=9):
    snap = M.CacheSnapshot(controller_id=5, brokers=brokers, partitions=cache, generation=3)
    by = snap.topics()
    head = M.metadata_response(snap, {"Topics": None}, v, "cid", {})
    entries = kept.encoded(by, snap.brokers, v, lambda e: codec.encode_element("MetadataResponse", v, "Topics", e))
    return codec.encode_spliced("MetadataResponse", v, head, "Topics", entries)
# a failure's four releases: each replaces a quarter of the views
res = {"whole": [], "kept": []}
for _ in range(5):
    kept = M.TopicEncodings(); cache = dict(views); answer(kept, cache)
    for q in range(4):
        cache = dict(cache)
        for tp in tps[q * 2500:(q + 1) * 2500]:
            cache[tp] = cache[tp]._replace(leader_epoch=cache[tp].leader_epoch + 1)
        t = time.process_time(); a = answer(kept, cache); res["kept"].append(time.process_time() - t)
        snap = M.CacheSnapshot(controller_id=5, brokers=brokers, partitions=cache, generation=3)
        t = time.process_time(); b = codec.encode("MetadataResponse", 9, M.metadata_response(snap, {"Topics": None}, 9, "cid")); res["whole"].append(time.process_time() - t)
        assert a == b
print({k: round(statistics.median(v) * 1000, 1) for k, v in res.items()}, "ms per answer after a quarter of the partitions changed")
