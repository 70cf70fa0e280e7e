"""`kafka-reassign-partitions.sh --zookeeper`: generate, execute (with a replication throttle)
and verify a reassignment through `/admin/reassign_partitions`."""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Callable

from controller_core.assignment import assign_replicas_to_brokers
from controller_core.values import TopicPartition

from adapters.admin.checks import random_seed, broker_id_list
from adapters.admin.cluster_state import (
    ensure_paths,
    live_brokers,
    read_assignments,
    read_marked_for_deletion,
    read_reassignment_in_progress,
)
from adapters.admin.errors import AdminError
from adapters.admin import throttle as throttling
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.zookeeper.session import NodeExists, ZkSession


REASSIGNMENT_COMPLETED = "completed"
REASSIGNMENT_IN_PROGRESS = "in progress"
REASSIGNMENT_FAILED = "failed"


def parse_broker_list(text: str) -> list[int]:
    items = [s.strip() for s in text.split(",")]
    if not text.strip() or not all(re.fullmatch(r"[0-9]{1,10}", s) for s in items):
        raise AdminError(f"--broker-list must be comma-separated broker ids, got {text!r}")
    brokers = [int(s) for s in items]
    duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
    if duplicates:
        raise AdminError(f"Broker list contains duplicate entries: {broker_id_list(duplicates)}")
    return brokers


async def generate_reassignment(
    zk: ZkSession,
    topics: Sequence[str],
    broker_list: Sequence[int],
    *,
    disable_rack_aware: bool = False,
    seed: int | None = None,
) -> tuple[list[tuple[TopicPartition, tuple[int, ...]]], list[tuple[TopicPartition, list[int]]]]:
    """(current assignment, proposed assignment) of every partition of `topics`, the proposal
    placing each topic afresh over `broker_list` (Kafka's `generateAssignment`)."""
    if not topics:
        raise AdminError("the topics-to-move file lists no topics")
    duplicates = sorted({b for b in broker_list if list(broker_list).count(b) > 1})
    if duplicates:
        raise AdminError(f"Broker list contains duplicate entries: {broker_id_list(duplicates)}")
    found = await read_assignments(zk, topics)
    missing = [t for t in topics if t not in found]
    if missing:
        raise AdminError(f"Topic(s) {', '.join(missing)} do not exist")
    brokers = await live_brokers(zk)
    down = sorted(set(broker_list) - set(brokers))
    if down:
        raise AdminError(f"The broker list contains brokers that are not registered: {broker_id_list(down)}")
    placement = [(b, None if disable_rack_aware else brokers[b].rack) for b in broker_list]
    generator_seed = random_seed() if seed is None else seed
    current: list[tuple[TopicPartition, tuple[int, ...]]] = []
    proposed: list[tuple[TopicPartition, list[int]]] = []
    for index, topic in enumerate(sorted(found)):
        assignment, _ = found[topic]
        for p in sorted(assignment):
            current.append((TopicPartition(topic, p), assignment[p].target_replicas))
        rf = len(assignment[min(assignment)].target_replicas)
        try:
            placed = assign_replicas_to_brokers(placement, len(assignment), rf, seed=generator_seed + index)
        except ValueError as exc:
            raise AdminError(f"topic {topic}: {exc}") from None
        proposed.extend((TopicPartition(topic, p), r) for p, r in sorted(placed.items()))
    return current, proposed


async def validate_reassignment(zk: ZkSession, entries: Sequence[tuple[TopicPartition, Sequence[int]]]):
    """Kafka's `parseAndValidate`, plus topics being deleted. Returns the topics' assignments."""
    if not entries:
        raise AdminError("Partition reassignment data file is empty")
    if any(not replicas for _, replicas in entries):
        raise AdminError("Partition replica list cannot be empty")
    seen: set[TopicPartition] = set()
    twice = []
    for tp, _ in entries:
        if tp in seen:
            twice.append(str(tp))
        seen.add(tp)
    if twice:
        raise AdminError(f"Partition reassignment contains duplicate topic partitions: {','.join(twice)}")
    duplicated = [(tp, sorted({r for r in replicas if list(replicas).count(r) > 1})) for tp, replicas in entries]
    duplicated = [(tp, d) for tp, d in duplicated if d]
    if duplicated:
        raise AdminError("Partition replica lists may not contain duplicate entries: " + ". ".join(
            f"{tp} contains multiple entries for {broker_id_list(d)}" for tp, d in duplicated))
    topics = list(dict.fromkeys(tp.topic for tp, _ in entries))
    found = await read_assignments(zk, topics)
    missing = [str(tp) for tp, _ in entries if tp.topic not in found or tp.partition not in found[tp.topic][0]]
    if missing:
        raise AdminError(f"The proposed assignment contains non-existent partitions: {', '.join(missing)}")
    brokers = await live_brokers(zk)
    unknown = sorted({b for _, replicas in entries for b in replicas} - set(brokers))
    if unknown:
        raise AdminError(f"The proposed assignment contains non-existent brokerIDs: {broker_id_list(unknown)}")
    deleting = sorted(set(topics) & await read_marked_for_deletion(zk))
    if deleting:
        raise AdminError(f"Topic(s) {', '.join(deleting)} are marked for deletion and cannot be reassigned")
    return found


async def execute_reassignment(
    zk: ZkSession, entries: Sequence[tuple[TopicPartition, Sequence[int]]], *, throttle: int | None = None,
    on_validated: Callable[[list[tuple[TopicPartition, tuple[int, ...]]]], None] | None = None,
) -> list[tuple[TopicPartition, tuple[int, ...]]]:
    """Validate, then create `/admin/reassign_partitions`. Returns the current assignment of
    every partition of the topics involved (to print for rollback; also handed to
    `on_validated` before anything is written). With `throttle` (bytes/s) the throttle keys are
    written first, as Kafka's tool does (adapters/admin/throttle.py)."""
    found = await validate_reassignment(zk, entries)
    if await zk.exists(zkpaths.REASSIGN_PARTITIONS) is not None:
        raise AdminError("There is an existing assignment running.")
    current = [(TopicPartition(t, p), ra.target_replicas)
               for t in sorted(found) for p, ra in sorted(found[t][0].items())]
    if on_validated is not None:
        on_validated(current)
    if throttle is not None:
        existing = dict(current)
        proposed = {tp: list(r) for tp, r in entries}
        await throttling.set_replicas(zk, existing, proposed)
        await throttling.set_rate(zk, existing, proposed, throttle)
    await ensure_paths(zk, zkpaths.ADMIN)
    try:
        await zk.create(zkpaths.REASSIGN_PARTITIONS,
                        zkdata.encode_reassignment([(tp, list(r)) for tp, r in entries]))
    except NodeExists:
        raise AdminError("There is an existing assignment running.") from None
    return current


async def reassignment_running(zk: ZkSession) -> bool:
    return await zk.exists(zkpaths.REASSIGN_PARTITIONS) is not None


async def change_reassignment_throttle(zk: ZkSession, entries: Sequence[tuple[TopicPartition, Sequence[int]]],
                                       rate: int) -> int:
    """Kafka's `maybeLimit` on a running reassignment: the new rate on the same brokers (those
    holding replicas of the file's topics now, and the file's targets)."""
    found = await read_assignments(zk, {tp.topic for tp, _ in entries})
    existing = {TopicPartition(t, p): ra.replicas for t, (a, _) in found.items() for p, ra in a.items()}
    await throttling.set_rate(zk, existing, {tp: list(r) for tp, r in entries}, rate)
    return rate


async def remove_reassignment_throttle(zk: ZkSession, topics: Iterable[str]) -> bool:
    """Kafka's `removeThrottle` (call it once every partition completed): the rate keys from
    every registered broker, the replica keys from `topics`. True if anything was removed."""
    return await throttling.remove(zk, sorted(set(topics)), sorted(await live_brokers(zk)))


async def verify_reassignment(
    zk: ZkSession, entries: Sequence[tuple[TopicPartition, Sequence[int]]]
) -> list[tuple[TopicPartition, str]]:
    """Kafka's `checkIfPartitionReassignmentSucceeded`, in file order: in progress while the
    partition is still in `/admin/reassign_partitions`, then completed if the topic znode holds
    exactly the requested replicas, failed otherwise."""
    running = await read_reassignment_in_progress(zk) or {}
    found = await read_assignments(zk, {tp.topic for tp, _ in entries})
    out = []
    for tp, replicas in entries:
        if tp in running:
            out.append((tp, REASSIGNMENT_IN_PROGRESS))
            continue
        ra = found.get(tp.topic, ({}, 0))[0].get(tp.partition)
        ok = ra is not None and not ra.is_being_reassigned and tuple(ra.replicas) == tuple(replicas)
        out.append((tp, REASSIGNMENT_COMPLETED if ok else REASSIGNMENT_FAILED))
    return out
