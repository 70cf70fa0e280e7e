"""How long a broker takes to build and encode an all-topics Metadata v9 answer from its cache
(`python -m benchmarks.kafka_metadata [PARTITIONS ...]`): the work done on the node's event loop
for the first client request after each UpdateMetadata; later requests reuse the encoding."""
from __future__ import annotations

import statistics
import sys
import time

from adapters.kafka import metadata as M
from adapters.kafka import protocol as K
from controller_core.values import BrokerInfo, PartitionView, TopicPartition


class _Cache:
    """The fields of `adapters.broker.broker.Broker` that `metadata.snapshot` reads."""

    def __init__(self, partitions: int):
        self._meta_brokers = {i: BrokerInfo(i, "127.0.0.1", 9000 + i, 1, None) for i in range(1, 6)}
        self._meta_partitions = {}
        for i in range(partitions):
            tp = TopicPartition(f"t{i // 100}", i % 100)
            self._meta_partitions[tp] = PartitionView(tp, 1 + i % 5, 3, (1, 2, 3), 1, 0, (1, 2, 3))
        self.metadata_controller_id = 1
        self.metadata_generation = 1


def measure(partitions: int, runs: int = 5) -> tuple[float, int]:
    cache = _Cache(partitions)
    request = K.Request(K.API_METADATA, 9, 1, "bench", {"Topics": None})
    times, size = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        body = M.metadata_response(M.snapshot(cache), request.body, 9, "cluster")
        size = len(K.response_frame(request, body))
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, size


def main(argv: list[str]) -> None:
    for n in [int(a) for a in argv] or [1000, 10_000]:
        ms, size = measure(n)
        print(f"{n} partitions: median {ms:.0f} ms of 5 runs, {size} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
