"""adapters/controller/zkwriter.py against a real ZooKeeper: a `WritePartitionStates` executed as
the controller executes it, from the command to its `PartitionStatesWritten` outcomes (progress
reports of a large write, conflicts with their content, versions that differ from the
prediction), in the product's pattern, in a by-path pattern, and after a ZooKeeper error."""
from __future__ import annotations

import asyncio

import pytest

from adapters.controller.zkpattern import PATTERNS
from adapters.controller.zkwriter import PROGRESS_MIN, PROGRESS_PARTS, ZkWriter
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.zookeeper.session import CONTROLLER_EPOCH_PATH, ZkError, ZkSession
from controller_core import commands as C
from controller_core import events as E
from controller_core.values import LeaderIsr, TopicPartition

N = PROGRESS_MIN + 400  # large enough to report progress


@pytest.fixture
async def zk(zk_connect):
    session = await ZkSession.connect(zk_connect, session_timeout_ms=10000)
    await session.create(CONTROLLER_EPOCH_PATH, b"3")
    yield session
    await session.close()


def _tps(n: int) -> list[TopicPartition]:
    return [TopicPartition(f"t{i // 100}", i % 100) for i in range(n)]


def _command(write_id: int, tps, leader: int, expected: int, predicted: dict | None = None) -> C.WritePartitionStates:
    predicted = predicted or {}
    return C.WritePartitionStates(write_id=write_id, writes=tuple(
        C.PartitionWrite(tp=tp, leader_isr=LeaderIsr(leader, leader, (leader, 2, 3), 3,
                                                     predicted.get(tp, expected + 1)),
                         expected_version=expected)
        for tp in tps))


async def _run(zk, command, pattern=PATTERNS["batched"]) -> list:
    events = []
    writer = ZkWriter(zk, events.append, clock=lambda: 0, pattern=pattern)
    await writer._write_states(command, 0)
    return events


async def test_a_large_write_reports_progress_then_only_its_surprises(zk):
    tps = _tps(N)
    events = await _run(zk, _command(1, tps, 1, -1))  # creates, parents too
    assert [e.final for e in events] == [False] * (PROGRESS_PARTS - 1) + [True]
    assert events[-1] == E.PartitionStatesWritten(at=0, write_id=1)  # every write landed as predicted
    landed = [tp for e in events[:-1] for tp in e.landed]
    assert len(landed) == len(set(landed)) and set(landed) <= set(tps)
    assert all(len(e.landed) >= N // PROGRESS_PARTS for e in events[:-1])

    other, wrong = tps[2_345], tps[17]
    theirs = LeaderIsr(2, 9, (2,), 3, 1)
    await zk.set(zkpaths.partition_state(*other), zkdata.encode_partition_state(theirs), 0)  # a leader shrank its ISR
    # the core predicted version 5 for one write: it lands at 1, which the outcome must say
    events = await _run(zk, _command(2, tps, 2, 0, predicted={wrong: 5}))
    final = events[-1]
    assert final.final and final.write_id == 2
    assert final.conflicts == ((other, theirs),)
    assert final.versions == ((wrong, 1),)
    landed = [tp for e in events[:-1] for tp in e.landed]
    assert other not in landed and wrong not in landed  # progress lists writes at their predicted version only
    got = await zk.get_many([zkpaths.partition_state(*tp) for tp in (tps[0], wrong, tps[-1])])
    expected_data = zkdata.encode_partition_state(LeaderIsr(2, 2, (2, 2, 3), 3))
    assert {data for data, _ in got.values()} == {expected_data}
    assert {stat.version for _, stat in got.values()} == {1}


async def test_a_by_path_pattern_reports_the_same_outcome(zk):
    tps = _tps(120)
    assert (await _run(zk, _command(1, tps, 1, -1), PATTERNS["kafka-2.4"]))[-1].conflicts == ()
    theirs = LeaderIsr(3, 9, (3,), 3, 1)
    await zk.set(zkpaths.partition_state(*tps[7]), zkdata.encode_partition_state(theirs), 0)
    events = await _run(zk, _command(2, tps, 2, 0, predicted={tps[9]: 4}), PATTERNS["kafka-2.4"])
    assert events == [E.PartitionStatesWritten(at=0, write_id=2, versions=((tps[9], 1),),
                                               conflicts=((tps[7], theirs),))]


class _Failing:
    """The product's pattern, failing with a ZooKeeper error before or after it wrote."""

    progress = True

    def __init__(self, write_first: bool):
        self.write_first = write_first

    async def write_columns(self, zk, *args, **kwargs):
        if self.write_first:
            await PATTERNS["batched"].write_columns(zk, *args, **kwargs)
        raise ZkError(detail="connection trouble")


async def test_after_a_zookeeper_error_the_outcome_is_read_back(zk):
    tps = _tps(50)
    await _run(zk, _command(1, tps, 1, -1))
    # it landed, but the writer never heard: read back, every write landed
    events = await _run(zk, _command(2, tps, 2, 0), _Failing(write_first=True))
    assert events == [E.PartitionStatesWritten(at=0, write_id=2)]
    # it did not land: read back, every write is a conflict with what the znode holds
    events = await _run(zk, _command(3, tps, 3, 1), _Failing(write_first=False))
    (final,) = events
    assert final.versions == () and [tp for tp, _ in final.conflicts] == tps
    assert {state for _, state in final.conflicts} == {LeaderIsr(2, 2, (2, 2, 3), 3, 1)}


async def test_a_deleted_topics_removal_is_reported_after_its_znodes_are_gone(zk):
    """`TopicZnodesDeleted` comes once the multi removing the topic has been answered: a listing
    of /brokers/topics read after the report cannot name the topic (state.removing_topics)."""
    events = []
    writer = ZkWriter(zk, events.append, clock=lambda: 7)
    await zk.create(zkpaths.topic("gone"), zkdata.encode_topic_assignment({0: (1, 2)}), make_parents=True)
    await zk.create(zkpaths.partition_state("gone", 0), zkdata.encode_partition_state(LeaderIsr(1, 0, (1, 2), 3)),
                    make_parents=True)
    await zk.create(zkpaths.delete_topic("gone"), b"", make_parents=True)
    listed_at_report = []
    real_put = writer.put_event

    def put(event):
        if isinstance(event, E.TopicZnodesDeleted):
            listed_at_report.append(asyncio.ensure_future(zk.get_children(zkpaths.TOPICS)))  # read on report
        real_put(event)

    writer.put_event = put
    writer.write(C.DeleteTopic(topic="gone"), 0)
    await writer.drain()
    assert events == [E.TopicZnodesDeleted(at=7, topic="gone")]
    assert "gone" not in await listed_at_report[0]
    assert await zk.exists(zkpaths.topic("gone")) is None and await zk.exists(zkpaths.delete_topic("gone")) is None
