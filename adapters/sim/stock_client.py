"""The cluster as a stock Kafka client sees it (confluent-kafka, i.e. librdkafka), for the demo
and the chaos soak's final check. confluent-kafka is a test extra: `available()` says whether it
is installed, and callers say so rather than fail where it is not.
"""
from __future__ import annotations

import asyncio

from controller_core.values import TopicPartition
from adapters.sim.cluster import controller, partition_states
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.zookeeper.session import ZkSession


def available() -> bool:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    return True


def client_version() -> str:
    import confluent_kafka

    return f"confluent-kafka {confluent_kafka.__version__}, librdkafka {confluent_kafka.libversion()[0]}"


def list_topics(bootstrap: str, timeout: float = 10.0) -> dict:
    """`AdminClient.list_topics()` as plain values: {"controller", "brokers": {id: "host:port"},
    "partitions": {TopicPartition: (leader, [replicas], [isr])}, "errors": {TopicPartition: code}}.
    Blocking (librdkafka's own threads): call it from a worker thread in async code."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000)}) \
        .list_topics(timeout=timeout)
    partitions, errors = {}, {}
    for t in md.topics.values():
        for p in t.partitions.values():
            tp = TopicPartition(t.topic, p.id)
            partitions[tp] = (p.leader, list(p.replicas), list(p.isrs))
            if p.error is not None:
                errors[tp] = p.error.code()
    return {"controller": md.controller_id, "brokers": {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()},
            "partitions": partitions, "errors": errors}


async def list_topics_async(bootstrap: str, timeout: float = 10.0) -> dict:
    return await asyncio.to_thread(list_topics, bootstrap, timeout)


def differences(seen: dict, controller: int | None, brokers: dict, expected: dict) -> list[str]:
    """What a client's `list_topics` view says that ZooKeeper does not: `brokers` {id: "host:port"}
    of the live registrations, `expected` {TopicPartition: (leader, replicas, isr)}."""
    problems = []
    if seen["controller"] != controller:
        problems.append(f"controller {seen['controller']} for the client, {controller} in ZooKeeper")
    if seen["brokers"] != brokers:
        problems.append(f"brokers {sorted(seen['brokers'].items())} for the client, "
                        f"{sorted(brokers.items())} in ZooKeeper")
    got = seen["partitions"]
    for tp in sorted(set(got) | set(expected)):
        if got.get(tp) != expected.get(tp):
            problems.append(f"{tp}: {_show(got.get(tp))} for the client, {_show(expected.get(tp))} in ZooKeeper")
    return problems


def _show(v) -> str:
    if v is None:
        return "absent"
    leader, replicas, isr = v
    return f"leader {leader} replicas {replicas} isr {isr}"


async def summary(zk_connect: str) -> str:
    """One line for `kctl demo`: what a stock client sees through the lowest broker's listener,
    checked against ZooKeeper."""
    if not available():
        return "stock Kafka client: not shown (confluent-kafka is not installed)"

    zk = await ZkSession.connect(zk_connect)
    try:
        holder, _ = await controller(zk)
        brokers = {}
        for b in sorted(int(x) for x in await zk.get_children(zkpaths.BROKERS_IDS)):
            data, stat = await zk.get(zkpaths.broker(b))
            info = zkdata.decode_broker(b, data, stat.czxid)
            brokers[b] = f"{info.host}:{info.port}"
        expected = {}
        for tp, li in (await partition_states(zk)).items():
            data, _ = await zk.get(zkpaths.topic(tp.topic))
            expected[tp] = (li.leader, list(zkdata.decode_topic_assignment(data)[tp.partition].replicas), list(li.isr))
    finally:
        await zk.close()
    bootstrap = brokers[min(brokers)]
    try:
        seen = await list_topics_async(bootstrap)
    except Exception as exc:
        return f"stock Kafka client at {bootstrap}: no metadata ({exc})"
    problems = differences(seen, holder, brokers, expected)
    verdict = "equal to ZooKeeper's" if not problems else f"{len(problems)} difference(s), e.g. {problems[0]}"
    return (f"{client_version()} list_topics at {bootstrap}: {len(seen['brokers'])} brokers, controller "
            f"{seen['controller']}, {len(seen['partitions'])} partitions; leaders, replicas, ISRs {verdict}")
