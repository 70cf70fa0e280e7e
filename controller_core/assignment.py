"""Partition placement: Kafka 2.4's `AdminUtils.assignReplicasToBrokers`, made pure.

Kafka spreads replicas with two round robins over the broker list:

* the first replica (the preferred leader) of partition `p` goes to broker
  `(start_index + p) % n`, so leaders cycle over every broker;
* each following replica sits at a shift from the first one. The shift grows by one every time
  the partition id wraps around the broker list, so partitions that share a leader do not all
  share the same followers either.

With rack information for every broker the list is first rearranged so that consecutive entries
alternate between racks (`rack_alternated_broker_list`), and a follower candidate is skipped
while its rack (or the broker itself) already holds a replica of the partition, unless every
rack (or every broker) already does.

Two things differ from Kafka, deliberately:

* Kafka draws the start index and the follower shift from a global `java.util.Random`. Here they
  come from `seed` through a small deterministic generator, so the same inputs always give the
  same placement and the core never touches a random source.
* Kafka uses the broker list in whatever order its caller passed. The CreateTopics path fed it
  the metadata cache's unordered list while the add-partitions path sorted it, so adding
  partitions did not continue the placement of creation (new partitions landed on the brokers
  that already led the old ones). This module always sorts the brokers by id first, so the
  order of the input never matters.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "assign_replicas_to_brokers",
    "expand_partitions",
    "rack_alternated_broker_list",
]

_MASK64 = (1 << 64) - 1


def assign_replicas_to_brokers(
    brokers: Iterable[tuple[int, str | None]],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    *,
    seed: int | None = None,
) -> dict[int, list[int]]:
    """Place `n_partitions` partitions of `replication_factor` replicas on `brokers`.

    `brokers` holds `(broker_id, rack_or_None)` pairs in any order. Partition ids start at
    `max(0, start_partition_id)`. With `fixed_start_index >= 0` it is both the start index and
    the initial follower shift (what Kafka's add-partitions path passes); otherwise both are
    drawn from `seed`, and are 0 when `seed` is None.

    Returns `{partition_id: [broker_id, ...]}` in partition order; the first broker of each list
    is the preferred leader. Raises ValueError with Kafka's messages on impossible requests.
    """
    ordered = _sorted_brokers(brokers)
    if n_partitions <= 0:
        raise ValueError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise ValueError("Replication factor must be larger than 0.")
    if replication_factor > len(ordered):
        raise ValueError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(ordered)}."
        )

    if fixed_start_index >= 0:
        start_index = shift = fixed_start_index
    elif seed is None:
        start_index = shift = 0
    else:
        generator = _SplitMix64(seed)
        start_index = generator.below(len(ordered))
        shift = generator.below(len(ordered))

    first_partition = max(0, start_partition_id)
    if all(rack is None for _, rack in ordered):
        return _rack_unaware(
            [broker_id for broker_id, _ in ordered],
            n_partitions,
            replication_factor,
            start_index,
            shift,
            first_partition,
        )
    if any(rack is None for _, rack in ordered):
        raise ValueError("Not all brokers have rack information for replica rack aware assignment.")
    return _rack_aware(
        {broker_id: rack for broker_id, rack in ordered},
        n_partitions,
        replication_factor,
        start_index,
        shift,
        first_partition,
    )


def expand_partitions(
    existing: Mapping[int, Sequence[int]],
    brokers: Iterable[tuple[int, str | None]],
    new_total: int,
    *,
    topic: str = "<unknown>",
) -> dict[int, list[int]]:
    """Placement of the partitions added when a topic grows to `new_total` partitions.

    Mirrors Kafka 2.4's `AdminZkClient.addPartitions` without a manual assignment: the
    replication factor is that of partition 0, the start index is the position in the
    id-sorted broker list of the first broker whose id is at least partition 0's preferred
    leader (0 if there is none), and new partition ids follow the existing ones.

    Returns only the new partitions, `{partition_id: [broker_id, ...]}`; merge them with
    `existing` to get the topic's whole assignment. `topic` only names the topic in errors.
    """
    if 0 not in existing:
        raise ValueError(
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is "
            f"missing. Assignment: {dict(existing)}"
        )
    current = len(existing)
    if new_total - current <= 0:
        raise ValueError(
            "The number of partitions for a topic can only be increased. "
            f"Topic {topic} currently has {current} partitions, "
            f"{new_total} would not be an increase."
        )
    partition_zero = list(existing[0])
    if not partition_zero:
        raise ValueError(f"Partition 0 of topic {topic} has no replicas.")
    ordered = _sorted_brokers(brokers)
    preferred_leader = partition_zero[0]
    start_index = next(
        (index for index, (broker_id, _) in enumerate(ordered) if broker_id >= preferred_leader),
        0,
    )
    return assign_replicas_to_brokers(
        ordered, new_total - current, len(partition_zero), start_index, current
    )


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered so that consecutive entries alternate between racks.

    Racks are visited in name order, and each rack yields its brokers in id order; a rack that
    runs out is skipped. With rack1: 0, 1, 2 / rack2: 3, 4 / rack3: 6 the result is
    0, 3, 6, 1, 4, 2.
    """
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(broker_racks):
        by_rack.setdefault(broker_racks[broker_id], []).append(broker_id)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(broker_racks):
        for queue in queues:
            if depth < len(queue):
                result.append(queue[depth])
        depth += 1
    return result


def _sorted_brokers(brokers: Iterable[tuple[int, str | None]]) -> list[tuple[int, str | None]]:
    ordered = sorted(((broker_id, rack) for broker_id, rack in brokers), key=lambda b: b[0])
    for previous, current in zip(ordered, ordered[1:]):
        if previous[0] == current[0]:
            raise ValueError(f"Broker {current[0]} is listed more than once.")
    return ordered


def _replica_index(first_replica_index: int, shift: int, replica_index: int, n_brokers: int) -> int:
    """Kafka's `replicaIndex`: the follower offset is never 0, so it never hits the leader."""
    offset = 1 + (shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + offset) % n_brokers


def _rack_unaware(
    broker_ids: list[int],
    n_partitions: int,
    replication_factor: int,
    start_index: int,
    shift: int,
    first_partition: int,
) -> dict[int, list[int]]:
    n_brokers = len(broker_ids)
    result: dict[int, list[int]] = {}
    for partition in range(first_partition, first_partition + n_partitions):
        if partition > 0 and partition % n_brokers == 0:
            shift += 1
        first = (partition + start_index) % n_brokers
        replicas = [broker_ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(broker_ids[_replica_index(first, shift, j, n_brokers)])
        result[partition] = replicas
    return result


def _rack_aware(
    broker_racks: dict[int, str],
    n_partitions: int,
    replication_factor: int,
    start_index: int,
    shift: int,
    first_partition: int,
) -> dict[int, list[int]]:
    arranged = rack_alternated_broker_list(broker_racks)
    n_brokers = len(arranged)
    n_racks = len(set(broker_racks.values()))
    result: dict[int, list[int]] = {}
    for partition in range(first_partition, first_partition + n_partitions):
        if partition > 0 and partition % n_brokers == 0:
            shift += 1
        first = (partition + start_index) % n_brokers
        leader = arranged[first]
        replicas = [leader]
        racks_used = {broker_racks[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            # Terminates: while some rack has no replica, one of its brokers is acceptable;
            # once all racks have one, any broker without a replica is (and RF <= n_brokers).
            while True:
                candidate = arranged[_replica_index(first, shift * n_racks, k, n_brokers)]
                rack = broker_racks[candidate]
                k += 1
                if (rack not in racks_used or len(racks_used) == n_racks) and (
                    candidate not in brokers_used or len(brokers_used) == n_brokers
                ):
                    replicas.append(candidate)
                    racks_used.add(rack)
                    brokers_used.add(candidate)
                    break
        result[partition] = replicas
    return result


class _SplitMix64:
    """A tiny deterministic generator (SplitMix64) so placement randomness is an input."""

    __slots__ = ("_state",)

    def __init__(self, seed: int) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int or None, got {seed!r}")
        self._state = seed & _MASK64

    def next64(self) -> int:
        self._state = (self._state + 0x9E3779B97F4A7C15) & _MASK64
        z = self._state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        return z ^ (z >> 31)

    def below(self, bound: int) -> int:
        """A value in [0, bound); the modulo bias is negligible for broker-list sizes."""
        return self.next64() % bound
