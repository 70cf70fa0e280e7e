"""Generated garbage (Hypothesis) in every znode the controller watches, through one live
controller on a real ZooKeeper.

Every example is written to its znode and the controller must: not crash, not stall (its queue
drains), remove what Kafka removes (reassignment and preferred-election requests, deletion
requests for unknown topics, ISR change notifications), and log exactly one ERROR line for
input that cannot be parsed. At the end a good reassignment and a topic creation still complete.

The default run is derandomized (the same examples every time: CI cannot flake) and small;
`-m slow` runs many more, randomized.
"""
from __future__ import annotations

import json

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.sim.cluster import wait_for
from adapters.controller.watches import _decode_reassignment_request, broker_id_of
from adapters.zookeeper.session import NodeExists
from controller_core.values import ReplicaAssignment, TopicPartition

from .test_bad_input import LiveCluster, _now, create_topic, full_isr, live, shared_cluster  # noqa: F401

FAST_RUN = settings(max_examples=6, deadline=None, derandomize=True, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SLOW_RUN = settings(FAST_RUN, max_examples=150, derandomize=False)

# -- strategies --------------------------------------------------------------------------------

scalars = (st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats(allow_nan=False)
           | st.text(max_size=8))
json_values = st.recursive(scalars, lambda kids: st.lists(kids, max_size=4)
                           | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=10)
ints = st.integers(-3, 5) | st.sampled_from([2**31 - 1, 2**31, -(2**31) - 1, 2**40]) | st.just(True)
broker_lists = st.lists(ints, max_size=4) | json_values
topic_names = st.sampled_from(["t", "ghost", "", "t/0"]) | st.text(max_size=4) | st.integers(-1, 2)
partition_entries = st.fixed_dictionaries(
    {"topic": topic_names, "partition": ints | st.text(max_size=2)},
    optional={"replicas": broker_lists, "log_dirs": json_values}) | json_values
admin_requests = st.fixed_dictionaries(
    {"partitions": st.lists(partition_entries, max_size=4) | json_values},
    optional={"version": st.just(1) | ints | json_values})
topic_assignments = st.fixed_dictionaries(
    {"partitions": st.dictionaries(st.sampled_from(["0", "1", "2", "-1", "01", "x"]) | st.text(max_size=3),
                                   broker_lists, max_size=3) | json_values},
    optional={"version": ints, "adding_replicas": json_values | st.dictionaries(st.just("0"), broker_lists)})
configs = st.fixed_dictionaries(
    {"config": st.dictionaries(st.sampled_from(["unclean.leader.election.enable", "retention.ms"])
                               | st.text(max_size=5), json_values | st.sampled_from(["true", "false", "maybe"]),
                               max_size=3) | json_values},
    optional={"version": ints})
registrations = st.fixed_dictionaries(
    {"version": ints | json_values},
    optional={"host": st.text(max_size=5) | json_values, "port": ints | json_values,
              "endpoints": st.lists(st.sampled_from(["PLAINTEXT://h:1", "x", "SSL://[::1]:-1"])
                                    | st.text(max_size=6), max_size=2) | json_values,
              "listener_security_protocol_map": json_values, "rack": json_values, "jmx_port": ints})
# znode names ZooKeeper accepts (printable ASCII, no "/", not "." or "..")
znode_names = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters="/"),
                      min_size=1, max_size=12).filter(lambda n: n not in (".", "..", "zookeeper"))


def encoded(structured):
    """Raw bytes, any JSON document, or a near miss of the right shape."""
    return (st.binary(max_size=48) | json_values.map(_dumps) | structured.map(_dumps)
            | st.binary(min_size=1, max_size=8).map(lambda b: _dumps({"partitions": []})[:-1] + b))


def _dumps(value) -> bytes:
    return json.dumps(value).encode()


KINDS = {
    "reassignment": encoded(admin_requests),
    "preferred": encoded(admin_requests),
    "deletion": st.tuples(znode_names, st.binary(max_size=16)),
    "topic": encoded(topic_assignments),
    "config": encoded(configs),
    "isr": encoded(admin_requests),
    # 44: a valid id that no generated reassignment names (a reassignment to a known broker that
    # is offline waits for it, as Kafka's does, and would keep its znode)
    "broker": st.tuples(st.sampled_from(["44", "-1", "007", "x", "99999999999"]) | znode_names,
                        encoded(registrations)),
}
rounds = st.fixed_dictionaries(KINDS)
"""One example feeds one payload of every kind, so that every znode gets the same share."""


def _fails(decode, data) -> bool:
    try:
        decode(data)
    except zkdata.ZnodeFormatError:
        return True
    return False


# -- one example ---------------------------------------------------------------------------------


class Feeder:
    """Writes one example to its znode and checks what the controller did with it."""

    def __init__(self, live: LiveCluster):
        self.live = live
        self.admin = live.admin
        self.controller = live.controller
        self.count = 0
        self.kinds: dict[str, int] = {}

    async def feed(self, kind: str, value) -> None:
        live, admin = self.live, self.admin
        mark = live.mark()
        self.count += 1
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        if kind in ("reassignment", "preferred"):
            path = zkpaths.REASSIGN_PARTITIONS if kind == "reassignment" else zkpaths.PREFERRED_REPLICA_ELECTION
            await admin.create(path, value)
            try:
                await live.gone(path, timeout=20)  # deleted when malformed, done or rejected
            except TimeoutError:
                state = self.controller.loop.state
                raise AssertionError(f"{path} kept: wrote {value!r}, now {(await admin.get(path))[0]!r}; "
                                     f"reassigning {sorted(state.reassigning)}, brokers {sorted(state.brokers.keys())}, "
                                     f"t-0 {state.partitions.get(TopicPartition('t', 0))}") from None
            decode = _decode_reassignment_request if kind == "reassignment" else zkdata.decode_preferred_replica_election
            if _fails(decode, value):
                await live.one_complaint(mark, f"malformed {path}")
        elif kind == "deletion":
            name, data = value
            if name in self.controller.loop.state.topics:
                return  # a real deletion; the hand-picked tests cover it
            await admin.create(zkpaths.delete_topic(name), data)
            await live.gone(zkpaths.delete_topic(name))
            await live.one_complaint(mark, "non-existing topics")
        elif kind == "topic":
            topic = f"gen{self.count}"
            await admin.create(zkpaths.topic(topic), value)
            if _fails(zkdata.decode_topic_assignment, value):
                await live.one_complaint(mark, f"topic {topic}: malformed topic znode")
            await live.settle()
            await admin.delete_recursive(zkpaths.topic(topic))  # a vanished topic is forgotten
            await wait_for(lambda: _now(topic not in self.controller.loop.state.topics), what=f"{topic} forgotten")
        elif kind == "config":
            await admin.set(zkpaths.config_topic("t"), value)
            if _fails(zkdata.decode_topic_config, value):
                await live.one_complaint(mark, zkpaths.config_topic("t"))
        elif kind == "isr":
            path = await admin.create(zkpaths.ISR_CHANGE_SEQUENCE_PREFIX, value, sequential=True)
            await live.gone(path)
            if _fails(zkdata.decode_isr_change_notification, value):
                await live.one_complaint(mark, path)
        elif kind == "broker":
            name, data = value
            path = f"{zkpaths.BROKERS_IDS}/{name}"
            if broker_id_of(name) is not None and name != "44":
                return  # the live brokers' own registrations, or ids a reassignment could name
            try:
                await admin.create(path, data)
            except NodeExists:
                return
            try:
                if name != "44" or _fails(lambda d: zkdata.decode_broker(44, d, 0), data):
                    await live.one_complaint(mark, path if name == "44" else repr(name))
                    assert set(self.controller.loop.state.brokers.keys()) == {1, 2, 3}
            finally:
                await admin.delete(path)
        await live.settle()
        assert live.controller is self.controller, "the controller changed"

    async def good_requests_still_complete(self) -> None:
        admin = self.admin
        data, _ = await admin.get(zkpaths.topic("t"))
        current = zkdata.decode_topic_assignment(data)[0].replicas
        target = (3, 1) if current != (3, 1) else (1, 2)
        await admin.create(zkpaths.REASSIGN_PARTITIONS, zkdata.encode_reassignment([(TopicPartition("t", 0), target)]))
        await self.live.gone(zkpaths.REASSIGN_PARTITIONS, timeout=30)
        data, _ = await admin.get(zkpaths.topic("t"))
        assert zkdata.decode_topic_assignment(data) == {0: ReplicaAssignment(target)}
        await create_topic(admin, "after", [[2, 3]])
        await wait_for(lambda: full_isr(admin, "after", 1), what="a topic created after the garbage")


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module")
async def feeder(live):
    await create_topic(live.admin, "t", [[1, 2]])
    await wait_for(lambda: full_isr(live.admin, "t", 1), what="t online")
    feeder = Feeder(live)
    yield feeder
    print(f"fed {feeder.count} examples: {feeder.kinds}")
    await feeder.good_requests_still_complete()


@FAST_RUN
@given(payloads=rounds)
async def test_generated_garbage_never_crashes_or_stalls_the_controller(feeder, payloads):
    for kind, value in sorted(payloads.items()):
        await feeder.feed(kind, value)


@pytest.mark.slow
@SLOW_RUN
@given(payloads=rounds)
async def test_generated_garbage_long(feeder, payloads):
    for kind, value in sorted(payloads.items()):
        await feeder.feed(kind, value)
