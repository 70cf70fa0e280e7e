"""The cluster as the admin tools read it: the one place that reads and decodes brokers, topic
assignments, partition states and topic configs for them, in batches (`ZkSession.get_many`), and
the summary `kctl cluster` prints. An unreadable znode is a `ToolFailure` naming it."""
from __future__ import annotations

from collections.abc import Iterable

from controller_core.values import BrokerInfo, LeaderIsr, ReplicaAssignment, TopicPartition

from adapters.admin.checks import legal_topic_name
from adapters.admin.errors import ToolFailure
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.zookeeper.session import NoNode, ZkSession


async def live_brokers(zk: ZkSession) -> dict[int, BrokerInfo]:
    """The registered brokers, by id."""
    try:
        names = await zk.get_children(zkpaths.BROKERS_IDS)
    except NoNode:
        return {}
    ids = sorted(int(n) for n in names if n.isdigit())
    found = await zk.get_many([zkpaths.broker(b) for b in ids])
    out = {}
    for b in ids:
        value = found.get(zkpaths.broker(b))
        if value is not None:
            out[b] = decoded(zkdata.decode_broker, b, value[0], value[1].czxid)
    return out


async def read_children(zk: ZkSession, path: str) -> list[str]:
    try:
        return sorted(await zk.get_children(path))
    except NoNode:
        return []


async def read_topic_names(zk: ZkSession) -> list[str]:
    return await read_children(zk, zkpaths.TOPICS)


async def read_assignments(zk: ZkSession, topics: Iterable[str]) -> dict[str, tuple[dict[int, ReplicaAssignment], int]]:
    """{topic: ({partition: ReplicaAssignment}, znode version)} for the topics that exist."""
    topics = [t for t in topics if legal_topic_name(t)]
    found = await zk.get_many([zkpaths.topic(t) for t in topics])
    out = {}
    for t in topics:
        value = found.get(zkpaths.topic(t))
        if value is not None:
            data, stat = value
            out[t] = (decoded(zkdata.decode_topic_assignment, data, topic=t), stat.version)
    return out


async def read_states(zk: ZkSession, tps: Iterable[TopicPartition]) -> dict[TopicPartition, LeaderIsr]:
    tps = list(tps)
    paths = {tp: zkpaths.partition_state(tp.topic, tp.partition) for tp in tps}
    found = await zk.get_many(paths.values())
    out = {}
    for tp, path in paths.items():
        value = found.get(path)
        if value is not None:
            out[tp] = decoded(zkdata.decode_partition_state, value[0], value[1].version, tp=tp)
    return out


async def read_configs(zk: ZkSession, topics: Iterable[str]) -> dict[str, dict[str, str]]:
    topics = [t for t in topics if legal_topic_name(t)]
    found = await zk.get_many([zkpaths.config_topic(t) for t in topics])
    out = {}
    for t in topics:
        value = found.get(zkpaths.config_topic(t))
        if value is not None:
            out[t] = decoded(zkdata.decode_topic_config, value[0])
    return out


async def read_marked_for_deletion(zk: ZkSession) -> set[str]:
    return set(await read_children(zk, zkpaths.DELETE_TOPICS))


async def read_reassignment_in_progress(zk: ZkSession) -> dict[TopicPartition, tuple[int, ...]] | None:
    try:
        data, _ = await zk.get(zkpaths.REASSIGN_PARTITIONS)
    except NoNode:
        return None
    try:
        return dict(zkdata.decode_reassignment(data))
    except zkdata.ZnodeFormatError:
        return {}  # there, but unreadable: still "an existing assignment running"


def decoded(decode, *args, **kwargs):
    try:
        return decode(*args, **kwargs)
    except zkdata.ZnodeFormatError as exc:
        raise ToolFailure(f"unreadable znode: {exc}") from None


async def ensure_paths(zk: ZkSession, *paths: str) -> None:
    for path in paths:
        if await zk.exists(path) is None:
            await zk.ensure_path(path)


async def cluster_summary(zk: ZkSession) -> dict:
    """Controller, live brokers and partition health counts, as Kafka's controller metrics
    count them: offline (no leader, or a leader that is not live) and preferred-replica
    imbalance exclude topics queued for deletion; under-replicated is ISR smaller than the
    assigned replicas."""
    try:
        data, _ = await zk.get(zkpaths.CONTROLLER)
        controller = decoded(zkdata.decode_controller, data)
    except NoNode:
        controller = None
    try:
        data, _ = await zk.get(zkpaths.CONTROLLER_EPOCH)
        epoch = decoded(zkdata.decode_controller_epoch, data)
    except NoNode:
        epoch = 0
    live = sorted(await live_brokers(zk))
    names = await read_topic_names(zk)
    marked = await read_marked_for_deletion(zk)
    assignments = await read_assignments(zk, names)
    tps = [TopicPartition(t, p) for t, (a, _) in sorted(assignments.items()) for p in sorted(a)]
    states = await read_states(zk, tps)
    offline = under = imbalance = 0
    for tp in tps:
        ra = assignments[tp.topic][0][tp.partition]
        replicas = ra.replicas
        li = states.get(tp)
        leader = li.leader if li is not None else -1
        isr = li.isr if li is not None else ()
        if len(isr) < len(replicas):
            under += 1
        if tp.topic in marked:
            continue
        if leader == -1 or leader not in live:
            offline += 1
        if replicas and ra.adding and replicas[0] in ra.adding:
            imbalance += replicas[0] in isr  # Kafka's rule while the preferred replica is being added
        elif replicas and leader != replicas[0]:
            imbalance += 1
    reassigning = await read_reassignment_in_progress(zk)
    return {
        "controller": controller,
        "controller_epoch": epoch,
        "live_brokers": live,
        "topics": len(assignments),
        "partitions": len(tps),
        "offline_partitions": offline,
        "under_replicated_partitions": under,
        "preferred_replica_imbalance": imbalance,
        "partitions_being_reassigned": len(reassigning) if reassigning is not None else 0,
        "topics_marked_for_deletion": sorted(marked),
    }
