"""A node's journal after faults: a torn tail is truncated and the node carries on; a flipped bit
before the tail stops `kctl node` with one error line naming file and line, and nothing is
truncated; a journal that cannot be written ends the controller's term without acting on what is
not durable. The writer's own fault tests (ENOSPC, EFBIG, fsync failures, kill -9) are in
test_journal.py; the full disk under a live cluster is tests/integration/test_journal_faults.py.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import os

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.cli import main
from adapters.sim.cluster import controller, live_broker_ids, partition_states, wait_for
from adapters.journal.writer import Journal, JournalWriteError, probe_writable
from adapters.controller.loop import ControllerLoop
from adapters.node import ClusterNode, NodeConfig
from adapters.zookeeper.session import ZkSession
from controller_core import commands as C
from controller_core import events as E
from controller_core.state import ControllerConfig
from controller_core.values import BrokerInfo, ReplicaAssignment, TopicPartition
from adapters.journal.format import list_segments, read_journal
from tests.adapters.executors import Recorder

FAST = {"zookeeper.session.timeout.ms": "3000", "auto.leader.rebalance.enable": "false",
        "replica.catch.up.delay.ms": "100"}


async def _now(value):
    return value


async def _led(admin, topic):
    states = await partition_states(admin, topic)
    return states if states and all(li.leader >= 0 for li in states.values()) else None


async def create(admin, topic, assignment) -> None:
    await admin.create(zkpaths.topic(topic), zkdata.encode_topic_assignment(
        {p: ReplicaAssignment(tuple(r)) for p, r in enumerate(assignment)}), make_parents=True)


async def test_a_torn_tail_is_truncated_and_the_node_carries_on(zk_connect, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    directory = tmp_path / "node-1"
    admin = await ZkSession.connect(zk_connect)
    config = NodeConfig(broker_id=1, zookeeper=zk_connect, journal_dir=str(directory), settings=FAST)
    node = ClusterNode(config)
    try:
        await node.start()
        await wait_for(lambda: _now(node.active and node.loop.state.active), what="node 1 the controller")
        await create(admin, "t", [[1]])
        await wait_for(lambda: _led(admin, "t"), what="t created")
        await node.loop.wait_idle()
        await node.close()  # the journal is synced and closed
        before = list(read_journal(directory))
        segment = list_segments(directory)[-1].path
        good_size = segment.stat().st_size
        with open(segment, "ab") as f:  # a crash in the middle of a write
            f.write(b'{"crc":"0badc0de","seq":%d,"controller_id":1,"contr' % (before[-1]["seq"] + 1))
        await wait_for(lambda: _gone(admin, 1), timeout=20, what="the old registration gone")

        node = ClusterNode(config)
        await node.start()
        notes = node.loop.journal.recovery_notes
        assert len(notes) == 1 and f"truncated torn tail of {segment.name}" in notes[0], notes
        assert segment.stat().st_size == good_size
        warnings = [r.getMessage() for r in caplog.records if "torn tail" in r.getMessage()]
        assert len(warnings) == 1 and warnings[0].endswith(notes[0])
        await wait_for(lambda: _now(node.active and node.loop.state.active), what="node 1 the controller again")
        await create(admin, "u", [[1]])
        await wait_for(lambda: _led(admin, "u"), what="u created after the repair")
        await node.loop.wait_idle()
        node.loop.flush_effects()
        node.loop.journal.sync_blocking()
        after = list(read_journal(directory, tolerate_torn_tail=False))
        assert after[: len(before)] == before  # nothing that was written before the crash is lost
        assert [r["seq"] for r in after] == list(range(1, len(after) + 1))
    finally:
        if not node._stopping:
            await node.close()
        await admin.close()


async def _gone(admin, broker_id):
    return broker_id not in await live_broker_ids(admin)


def test_a_flipped_bit_in_the_middle_stops_the_node_with_one_line(zk_connect, tmp_path, capsys):
    directory = tmp_path / "node-1"
    with Journal.open(directory, 1) as journal:
        for i in range(10):
            journal.append("event", {"i": i, "pad": "x" * 100}, controller_epoch=1, at=i)
    segment = list_segments(directory)[-1].path
    data = bytearray(segment.read_bytes())
    line_4 = sum(len(line) + 1 for line in data.split(b"\n")[:3])
    data[line_4 + 60] ^= 0x04  # one bit, inside line 4
    segment.write_bytes(bytes(data))

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level  # `kctl node` configures logging for its process
    try:
        code = main(["node", "--broker-id", "1", "--zookeeper", zk_connect, "--journal-dir", str(directory)])
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == 1 and len(errors) == 1, err
    assert f"{segment}:4: checksum mismatch" in errors[0], errors[0]
    assert "Traceback" not in err
    assert segment.read_bytes() == bytes(data)  # nothing truncated: the operator decides

    async def not_registered():
        admin = await ZkSession.connect(zk_connect)
        try:
            return await live_broker_ids(admin), await controller(admin)
        finally:
            await admin.close()

    assert asyncio.run(not_registered()) == ([], (None, 0))


async def test_an_unwritable_journal_ends_the_term_without_acting_on_what_is_not_durable(tmp_path, monkeypatch):
    journal = Journal.open(tmp_path, 1, fsync="batch")
    executor = Recorder()
    loop = ControllerLoop(ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False), executor, journal)
    failures = []
    loop.on_journal_failure = failures.append
    runner = asyncio.create_task(loop.run())
    try:
        brokers = (BrokerInfo(1, "h", 1, 10), BrokerInfo(2, "h", 2, 11))
        loop.put(E.ControllerElected(at=1, epoch=1, epoch_zk_version=1, snapshot=E.ClusterSnapshot(brokers=brokers)))
        await loop.wait_idle()
        assert loop.state.active
        durable = journal.durable_seq

        def full(fd, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "write", full)
        executor.commands.clear()
        loop.put(E.TopicsChanged(at=2, topics={"t"}, assignments=(("t", ((0, ReplicaAssignment((1, 2))),)),)))
        await loop.wait_idle()
        assert len(failures) == 1 and isinstance(failures[0], JournalWriteError)
        assert not loop.state.active and "t" not in loop.state.topics  # resigned, the topic not acted on
        assert not any(isinstance(c, (C.WritePartitionStates, C.SendLeaderAndIsr)) for c in executor.commands)

        # while unusable: requests are told "not controller", anything else is dropped
        tp = TopicPartition("t", 0)
        loop.put(E.LeaderElectionRequested(at=3, request_id=7, election_type="preferred", partitions=(tp,)))
        loop.put(E.ControllerElected(at=4, epoch=2, epoch_zk_version=2, snapshot=E.ClusterSnapshot(brokers=brokers)))
        await loop.wait_idle()
        reply = executor.commands[-1]
        assert isinstance(reply, C.ReplyLeaderElection) and reply.request_id == 7
        assert [(t, error.split(":")[0]) for t, error in reply.results] == [(tp, "NOT_CONTROLLER")]
        assert not loop.state.active and loop.dropped_events >= 1
        assert not loop.reopen_journal(probe_bytes=4096)  # still full

        monkeypatch.undo()
        assert loop.reopen_journal(probe_bytes=4096)
        loop.put(E.ControllerElected(at=5, epoch=2, epoch_zk_version=2, snapshot=E.ClusterSnapshot(brokers=brokers)))
        await loop.wait_idle()
        assert loop.state.active and len(failures) == 1
        loop.close_journal()
        records = list(read_journal(tmp_path, tolerate_torn_tail=False))
        seqs = [r["seq"] for r in records]
        assert seqs == list(range(1, len(seqs) + 1)) and seqs[-1] > durable
        events = [r["body"]["type"] for r in records if r["type"] == "event"]
        assert events == ["ControllerElected", "ControllerElected"]  # nothing of the failed batch
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        loop.close_journal(flush=False)


def test_probe_writable_names_the_directory_and_the_cause(tmp_path):
    probe_writable(tmp_path, 64 * 1024)
    assert sorted(os.listdir(tmp_path)) == []  # leaves nothing behind
    missing = tmp_path / "missing"
    try:
        probe_writable(missing)
    except JournalWriteError as exc:
        assert str(missing) in str(exc) and exc.errno == errno.ENOENT
    else:
        raise AssertionError("a missing directory is not writable")
