"""How the controller's partition states travel to ZooKeeper and back: one strategy per pattern,
chosen when a node is built (`NodeConfig.zk_pattern`), used by the ZooKeeper writer for the
writes and by the watches for the bulk reads of partition states.

- `batched` (the product): epoch-checked multi-ops of up to `DEFAULT_CHUNK_OPS` states, all sent
  at once (`ZkSession.write_states`); reads batched into multiRead requests
  (`ZkSession.get_many`).
- `sequential` (the benchmark's straw man, Kafka <= 1.0): one conditional write per partition,
  each awaited before the next; the product's reads.
- `kafka-2.4` (the benchmark's peer): Kafka 2.4.1's `KafkaZkClient.updateLeaderAndIsr` wraps
  each partition's setData with a check of `/controller_epoch`'s version into its own two-op
  multi (`wrapRequestWithControllerEpochCheck`), and `ZooKeeperClient.handleRequests` pipelines
  them behind one semaphore of `zookeeper.max.in.flight.requests` permits (default 10, KIP-214).
  `getTopicPartitionStatesRaw` reads the states the same way: one getData per partition behind
  the same semaphore. The controller thread blocks until the whole batch is answered, so no
  request is released before every state is written (`progress` is False).

Only the benchmark picks anything but `batched`.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable

from adapters.zookeeper.session import ConnectionLost, Fenced, SetData, StateWrites, TransactionFailed

KAFKA_MAX_IN_FLIGHT = 10
"""Kafka 2.4's `zookeeper.max.in.flight.requests` default (KafkaConfig.Defaults)."""


class Batched:
    name = "batched"
    progress = True  # a large write reports its quarters as they land (adapters/controller/zkwriter.py)

    async def write_columns(self, zk, epoch_zk_version: int, paths: list[str], values: list, expected: list[int],
                            encode_many: Callable[[list], list[bytes]], on_landed: Callable | None = None):
        """What the ZooKeeper writer calls: write i is (`paths[i]`, `values[i]` encoded by
        `encode_many`, `expected[i]`); returns `StateWrites` (by index, see
        `ZkSession.write_states`). `on_landed(start, versions)` as there."""
        return await zk.write_states(epoch_zk_version, paths, values, expected, encode=encode_many,
                                     on_landed=on_landed)

    async def write_states(self, zk, epoch_zk_version: int, writes: list, encode: Callable[[Any], bytes],
                           on_landed: Callable | None = None):
        """The same by path: `writes` are (path, value, expected); returns (versions, conflicts)
        keyed by path, as `ZkSession.write_partition_states`."""
        return await zk.write_partition_states(epoch_zk_version, writes, on_landed=on_landed, encode=encode)

    async def read_many(self, zk, paths: list[str]) -> dict:
        return await zk.get_many(paths)


class _ByPath(Batched):
    """A pattern whose writes are written by path (`write_states`): the writer's columns are
    turned into tuples and the outcome back into indices. Only the benchmark's other modes."""

    async def write_columns(self, zk, epoch_zk_version, paths, values, expected, encode_many, on_landed=None):
        versions, conflicts = await self.write_states(
            zk, epoch_zk_version, list(zip(paths, values, expected)), lambda value: encode_many([value])[0])
        index = {path: i for i, path in enumerate(paths)}
        by_index = [None] * len(paths)
        for path, version in versions.items():
            by_index[index[path]] = version
        return StateWrites(by_index, {index[path]: now for path, now in conflicts.items()})


class Sequential(_ByPath):
    name = "sequential"
    progress = False

    async def write_states(self, zk, epoch_zk_version, writes, encode, on_landed=None):
        versions, conflicts = {}, {}
        for path, value, expected in writes:
            v, c = await zk.write_partition_states(epoch_zk_version, [(path, encode(value), expected)])
            versions.update(v)
            conflicts.update(c)
        return versions, conflicts


class Kafka24(_ByPath):
    name = "kafka-2.4"
    progress = False

    def __init__(self, max_in_flight: int = KAFKA_MAX_IN_FLIGHT):
        self.max_in_flight = max_in_flight

    async def write_states(self, zk, epoch_zk_version, writes, encode, on_landed=None):
        items = iter(writes)  # shared by the workers: at most max_in_flight multis on the wire
        versions: dict[str, int] = {}
        failed: list[tuple[str, bytes, int]] = []
        fence: list[Fenced] = []

        async def worker() -> None:
            for path, value, expected in items:
                if fence:
                    return
                data = encode(value)
                try:
                    (stat,) = await zk.multi([SetData(path, data, expected)], epoch_zk_version)
                except Fenced as exc:
                    fence.append(exc)
                    return
                except (TransactionFailed, ConnectionLost):
                    failed.append((path, data, expected))
                    continue
                versions[path] = stat.version

        await asyncio.gather(*(worker() for _ in range(self.max_in_flight)))
        if fence:
            exc = fence[0]
            raise Fenced(exc.expected_version, exc.current_version, versions)
        conflicts: dict = {}
        if failed:
            # the rare path (a version conflict, a lost answer): the product's diagnosis, which
            # reads the znodes back and reports conflicts with their current content
            v, conflicts = await zk.write_partition_states(epoch_zk_version, failed)
            versions.update(v)
        return versions, conflicts

    async def read_many(self, zk, paths: list[str]) -> dict:
        return await zk.get_many(paths, window=self.max_in_flight, batch=1)


PATTERNS = {p.name: p for p in (Batched(), Sequential(), Kafka24())}


def pattern(name: str):
    try:
        return PATTERNS[name]
    except KeyError:
        raise ValueError(f"unknown ZooKeeper write pattern {name!r} (choose from {', '.join(PATTERNS)})") from None
