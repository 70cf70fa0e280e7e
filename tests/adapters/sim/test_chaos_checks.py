"""The chaos soak's checks fail when they should: values for the ZooKeeper checks, a real broker
over the control channel for the metadata check, a real ZooKeeper for the throttle keys; and the
fleet's failed and replaced log dirs on the file system."""
from __future__ import annotations

import pytest

from adapters.control import requests as Q
from adapters.broker.broker import Broker
from adapters.control.transport import ControlClient, ControlServer
from adapters.sim.chaos.checks import (
    ClusterView,
    check_deletions,
    check_leaders,
    check_log_dirs,
    check_log_dir_failures,
    check_metadata,
    check_processes,
    check_reassignments,
    check_throttles,
)
from adapters.sim.chaos.config import ChaosConfig
from adapters.sim.chaos.fleet import Fleet
from adapters.sim.chaos.workload import _config_change, throttle_keys
from adapters.sim.chaos.report import log_stats
from controller_core import commands as C
from controller_core.values import BrokerInfo, LeaderIsr, PartitionView, ReplicaAssignment, TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def view(states=None, *, brokers=(1, 2, 3), assignments=None, marked=(), configs=("t",), reassigning=(), epoch=4,
         ports=None):
    ports = ports or {}
    assignments = assignments if assignments is not None else {
        "t": {0: ReplicaAssignment((1, 2, 3)), 1: ReplicaAssignment((2, 3, 1))}}
    if states is None:
        states = {T0: LeaderIsr(1, 3, (1, 2, 3), epoch, 5), T1: LeaderIsr(2, 0, (2, 3), epoch, 1)}
    return ClusterView({b: BrokerInfo(b, "127.0.0.1", ports.get(b, 1), 100 + b) for b in brokers}, epoch,
                       assignments, states, frozenset(marked), frozenset(configs), tuple(reassigning))


def test_leaders_pass_on_a_healthy_view_and_name_each_kind_of_problem():
    assert check_leaders(view()).ok
    bad = view({T0: LeaderIsr(-1, 3, (4,), 4, 5), T1: LeaderIsr(2, 0, (3,), 4, 1)})
    result = check_leaders(bad)
    assert not result.ok and result.count == 2
    assert "t-0: no leader" in result.problems[0] and "t-1: leader 2 is not in its isr" in result.problems[1]
    assert "dead" not in result.detail
    # a leader that is not registered, an ISR outside the assignment, a missing state znode
    result = check_leaders(view({T0: LeaderIsr(4, 3, (4,), 4, 5), T1: LeaderIsr(2, 0, (2, 5), 4, 1)}))
    assert [p.split(":")[0] for p in result.problems] == ["t-0", "t-1"]
    assert "not live" in result.problems[0] and "not within the assignment" in result.problems[1]
    assert "no state znode" in check_leaders(view({T1: LeaderIsr(2, 0, (2,), 4, 1)})).problems[0]
    # no live replica at all: nobody can lead it, not a problem; topics being deleted are check 3's
    assert check_leaders(view({T1: LeaderIsr(2, 0, (2,), 4, 1)}, brokers=(4,))).ok
    assert check_leaders(view({}, marked=("t",))).ok


def test_reassignments_stuck_with_live_targets_or_lost_fail():
    assert check_reassignments(view()).ok
    waiting = view(reassigning=((T0, (1, 2, 4)),))  # broker 4 is dead: the reassignment may wait
    assert check_reassignments(waiting).ok
    stuck = check_reassignments(view(reassigning=((T0, (3, 2, 1)),)))
    assert not stuck.ok and "every target is live" in stuck.problems[0]
    half_done = {"t": {0: ReplicaAssignment((2, 3, 1), (), (1,)), 1: ReplicaAssignment((2, 3, 1))}}
    assert not check_reassignments(view(assignments=half_done)).ok
    # requested by the tool, not pending, and not applied: lost
    lost = check_reassignments(view(), {T0: (3, 2, 1)})
    assert not lost.ok and "was requested" in lost.problems[0]
    assert check_reassignments(view(), {T0: (1, 2, 3)}).ok  # applied
    assert check_reassignments(view(marked=("t",)), {T0: (3, 2, 1)}).ok  # its topic is being deleted


def test_deletions_left_behind_fail():
    gone = view(assignments={}, states={}, configs=())
    assert check_deletions(gone, ["t"]).ok
    result = check_deletions(view(marked=("t",)), ["t"])
    assert not result.ok
    assert result.problems == ("t: deletion requested, still in /brokers/topics, /config/topics, /admin/delete_topics",)
    orphan = check_deletions(view(assignments={}, states={}, configs=(), marked=("x",)), [])
    assert not orphan.ok and "/admin/delete_topics/x is left" in orphan.problems[0]


@pytest.fixture
async def broker_at():
    """A real broker (its metadata cache) behind a real ControlServer on loopback."""
    broker = Broker(1, None)
    server = ControlServer("127.0.0.1", 0, broker.handle)
    await server.start()
    yield broker, server.port
    await server.close()


async def update_metadata(port, states, live, epoch=4):
    c = C.SendUpdateMetadata(broker_id=1, broker_epoch=-1, controller_epoch=epoch,
                             partitions=tuple(PartitionView(tp, li.leader, li.leader_epoch, li.isr, li.controller_epoch,
                                                            li.zk_version, replicas)
                                              for tp, (li, replicas) in states.items()),
                             live_brokers=tuple(BrokerInfo(b, "127.0.0.1", 1, -1) for b in live))
    async with ControlClient("127.0.0.1", port) as client:
        assert await client.request(Q.UPDATE_METADATA, Q.update_metadata_body(c, 0)) == {}


async def test_metadata_compares_every_broker_cache_with_zookeeper(broker_at):
    broker, port = broker_at
    zk_view = view(brokers=(1,), ports={1: port})
    states = {T0: (zk_view.states[T0], (1, 2, 3)), T1: (zk_view.states[T1], (2, 3, 1))}
    await update_metadata(port, states, [1])
    assert (await check_metadata(zk_view)).ok
    # the broker missed an ISR change: one difference, named
    await update_metadata(port, {T1: (LeaderIsr(2, 0, (2,), 4, 1), (2, 3, 1))}, [1])
    result = await check_metadata(zk_view)
    assert not result.ok and result.count == 1
    assert result.problems[0] == ("broker 1: t-1 is leader 2 epoch 0 isr [2] replicas [2, 3, 1] in its cache, "
                                  "leader 2 epoch 0 isr [2, 3] replicas [2, 3, 1] in ZooKeeper")
    # a stale controller epoch, a different broker list, a partition ZooKeeper does not have
    gone = view(brokers=(1,), ports={1: port}, epoch=5, states={T0: zk_view.states[T0]},
                assignments={"t": {0: ReplicaAssignment((1, 2, 3))}})
    problems = (await check_metadata(gone)).problems
    assert any("controller epoch 4 in its cache, ZooKeeper has 5" in p for p in problems)
    assert any("t-1 in its cache" in p and "not in ZooKeeper" in p for p in problems)
    # a broker that does not answer
    silent = view(brokers=(1, 2), ports={1: port, 2: 9})
    assert any("broker 2" in p and "no Metadata answer" in p for p in (await check_metadata(silent)).problems)


def test_processes_and_log_stats(tmp_path):
    assert check_processes([]).ok
    result = check_processes([{"node": 3, "code": 1, "log_tail": "x\nerror: boom"}])
    assert not result.ok and result.problems == ("node 3 exited with code 1: error: boom",)
    (tmp_path / "node-1.log").write_text(
        "2026 INFO kctl.node: broker 1 is the controller, epoch 3 (fencing version 3)\n"
        "2026 WARNING kctl.node: broker 1 is no longer the controller: ZooKeeper session expired\n"
        "2026 ERROR kctl.zkwriter: fenced: /controller_epoch is at version 4, expected 3\n"
        "2026 INFO kctl.node: broker 1 is the controller, epoch 7 (fencing version 7)\n")
    assert log_stats([tmp_path / "node-1.log", tmp_path / "missing.log"]) == {
        "controller_terms": 2, "last_epoch": 7, "resignations": {"ZooKeeper session expired": 1},
        "fenced_writes": 1}


def test_throttles_fail_on_a_key_left_or_an_unverified_reassignment():
    assert check_throttles(None, [], []).ok
    passed = check_throttles(None, [], ["brokers/4: leader.replication.throttled.rate"])
    assert passed.ok and "1 left by verifies made while a broker was down, removed by it" in passed.detail
    left = check_throttles(None, ["topics/t: follower.replication.throttled.replicas"], [])
    assert not left.ok and left.problems == ("topics/t: follower.replication.throttled.replicas is left",)
    pending = check_throttles("the last throttled reassignment is still in progress", [], [])
    assert not pending.ok and pending.count == 1


def test_log_dir_failures_fail_when_a_partition_stayed_led_from_the_failed_dir():
    assert check_log_dir_failures([], 3).ok
    failed = check_log_dir_failures(["node 2: 1 partition(s) still led from its failed log dir d0"], 2)
    assert not failed.ok and failed.count == 1


def test_a_failed_log_dir_is_deleted_or_a_file_until_the_disk_is_replaced(tmp_path):
    fleet = Fleet(ChaosConfig(duration=1, seed=1, nodes=2), tmp_path)
    for d in fleet.log_dirs[1]:
        (d / "t-0").mkdir(parents=True)
    (fleet.log_dirs[1][0] / "u-12").mkdir()
    (fleet.log_dirs[1][0] / "not-a-replica").write_text("")
    assert fleet.replicas_in(fleet.log_dirs[1][0]) == [("t", 0), ("u", 12)]
    gone = fleet.fail_log_dir(1, 0, "deleted")
    as_file = fleet.fail_log_dir(1, 1, "replaced by a file")
    assert not gone.exists() and as_file.is_file() and fleet.replicas_in(gone) == []
    assert fleet.replace_log_dirs(1) == sorted([gone, as_file])
    assert all(d.is_dir() and not any(d.iterdir()) for d in fleet.log_dirs[1])  # fresh, empty
    assert fleet.failed_dirs == {} and fleet.replace_log_dirs(1) == []


def test_config_changes_drawn_are_valid_kctl_configs_alters():
    from adapters.admin.configs import validated

    for a in [i / 100 for i in range(100)]:
        for rf in (1, 2, 3):
            add, delete = _config_change(a, rf)
            assert validated("topics", add, delete) == (add, delete)
            if "min.insync.replicas" in add:
                assert 1 <= int(add["min.insync.replicas"]) <= rf
        add, delete = _config_change(a * 0.6, None)
        assert set(add) | set(delete) == {"unclean.leader.election.enable"}
        assert validated("brokers", add, delete) == (add, delete)


async def test_throttle_keys_lists_every_throttle_key_and_nothing_else(admin):
    from adapters.znodes import dynconfig as D

    await D.change_config(admin, D.TOPICS, "t", {D.LEADER_THROTTLED_REPLICAS: "0:1", "min.insync.replicas": "2"})
    await D.change_config(admin, D.BROKERS, "2", {D.FOLLOWER_THROTTLED_RATE: "100"})
    await D.change_config(admin, D.BROKERS, D.DEFAULT_ENTITY, {D.UNCLEAN_KEY: "true"})
    assert await throttle_keys(admin) == ["topics/t: leader.replication.throttled.replicas",
                                          "brokers/2: follower.replication.throttled.rate"]


async def test_log_dirs_fail_on_an_unconsumed_notification_or_a_dir_not_replaced(admin, tmp_path):
    fleet = Fleet(ChaosConfig(duration=1, seed=1, nodes=2), tmp_path)
    for dirs in fleet.log_dirs.values():
        for d in dirs:
            d.mkdir(parents=True)
    assert (await check_log_dirs(admin, fleet)).ok
    await admin.create("/log_dir_event_notification/log_dir_event_", b'{"version":1,"broker":2,"event":1}',
                       sequential=True, make_parents=True)
    fleet.fail_log_dir(2, 1, "replaced by a file")
    result = await check_log_dirs(admin, fleet)
    assert not result.ok and result.count == 2
    assert result.problems[0].startswith("/log_dir_event_notification still holds log_dir_event_")
    assert result.problems[1] == "node 2: log dir(s) d1 not replaced"
