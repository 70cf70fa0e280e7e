"""The replication throttle of `kctl reassign-partitions`, as Kafka 2.4's ReassignPartitionsCommand
sets and removes it.

`--execute --throttle N` on a new reassignment:

- each moved topic gets, in `/config/topics/<t>`, `leader.replication.throttled.replicas`: every
  pre-move replica of each partition that gains a replica (any of them may lead while it moves),
  and `follower.replication.throttled.replicas`: the replicas the partition gains, both as
  `partition:broker,...` (Kafka's `assignThrottledReplicas`);
- every broker that holds a replica of a moved partition's topic now, or is a target of the
  move, gets `leader.replication.throttled.rate` and `follower.replication.throttled.rate` = N in
  `/config/brokers/<id>` (Kafka's `maybeLimit`: its "existing assignment" is that of every
  partition of the moved topics).

On a reassignment already running, `--execute --throttle N` only rewrites the rates (the same
brokers), which is how an operator changes the throttle while it runs.

`--verify`, once every partition of the file completed, removes both rate keys from every
registered broker and both replica keys from every topic of the file, and says
`Throttle was removed.` if it removed anything (Kafka's `removeThrottle`).

Every write keeps the entity's other keys and is followed by a `/config/changes` notification
(adapters/znodes/dynconfig.py).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from controller_core.values import TopicPartition

from adapters.znodes import dynconfig as D
from adapters.zookeeper.session import ZkSession

RATE_KEYS = (D.LEADER_THROTTLED_RATE, D.FOLLOWER_THROTTLED_RATE)
REPLICA_KEYS = (D.LEADER_THROTTLED_REPLICAS, D.FOLLOWER_THROTTLED_REPLICAS)


def _format(moves: Mapping[TopicPartition, Sequence[int]]) -> str:
    return ",".join(f"{tp.partition}:{b}" for tp, brokers in sorted(moves.items()) for b in brokers)


def throttled_replicas(existing: Mapping[TopicPartition, Sequence[int]],
                       proposed: Mapping[TopicPartition, Sequence[int]]) -> dict[str, tuple[str, str]]:
    """{topic: (leader throttled replicas, follower throttled replicas)} for every topic of
    `proposed` (Kafka writes both keys for each topic, empty when none of its partitions moves)."""
    out = {}
    for topic in sorted({tp.topic for tp in proposed}):
        leader: dict[TopicPartition, Sequence[int]] = {}
        follower: dict[TopicPartition, Sequence[int]] = {}
        for tp, after in proposed.items():
            if tp.topic != topic:
                continue
            before = list(existing.get(tp, ()))
            gained = [b for b in after if b not in before]
            if gained:
                leader[tp] = before
            follower[tp] = sorted(gained)
        out[topic] = (_format(leader), _format(follower))
    return out


def throttled_brokers(existing: Mapping[TopicPartition, Sequence[int]],
                      proposed: Mapping[TopicPartition, Sequence[int]]) -> list[int]:
    """The brokers that get the rate: every replica of the moved topics' current assignment,
    and every move target."""
    brokers = {b for replicas in existing.values() for b in replicas}
    brokers |= {b for replicas in proposed.values() for b in replicas}
    return sorted(brokers)


async def set_replicas(zk: ZkSession, existing, proposed) -> None:
    for topic, (leader, follower) in throttled_replicas(existing, proposed).items():
        await D.change_config(zk, D.TOPICS, topic, {D.LEADER_THROTTLED_REPLICAS: leader,
                                                     D.FOLLOWER_THROTTLED_REPLICAS: follower})


async def set_rate(zk: ZkSession, existing, proposed, rate: int) -> list[int]:
    """Write the rate to every throttled broker; returns those brokers."""
    brokers = throttled_brokers(existing, proposed)
    for b in brokers:
        await D.change_config(zk, D.BROKERS, str(b), {key: str(rate) for key in RATE_KEYS})
    return brokers


async def remove(zk: ZkSession, topics: Sequence[str], brokers: Sequence[int]) -> bool:
    """Remove the rate keys from `brokers` and the replica keys from `topics`; True if any key
    was there."""
    changed = False
    for b in sorted(brokers):
        _, did = await D.change_config(zk, D.BROKERS, str(b), delete=RATE_KEYS)
        changed |= did
    for topic in sorted(set(topics)):
        config, version = await D.read_config(zk, D.TOPICS, topic)
        if version is None:
            continue  # no config znode (the topic was deleted): nothing to remove
        _, did = await D.change_config(zk, D.TOPICS, topic, delete=REPLICA_KEYS)
        changed |= did
    return changed
