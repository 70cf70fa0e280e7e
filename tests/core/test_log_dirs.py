"""Failed log dirs: LogDirEventNotification and KAFKA_STORAGE_ERROR answers (Kafka 2.4's
onBrokerLogDirFailure and onReplicasBecomeOffline)."""
from __future__ import annotations

from controller_core import codec
from controller_core import commands as C
from controller_core import events as E
from controller_core.machines import PartitionState as PS
from controller_core.machines import ReplicaState as RS

from controller_core.state import ControllerConfig
from controller_core.values import LeaderIsr

from .builders import AT, broker, elected, leader_isr, of_type, run, tp

STORAGE = "KAFKA_STORAGE_ERROR"


def cluster():
    return elected(topics={"t": [[1, 2, 3]], "u": [[2, 1]], "w": [[1]]})[0]


def test_a_log_dir_event_sends_the_broker_leader_and_isr_for_all_its_partitions():
    state, commands = run(cluster(), E.LogDirEventNotified(at=AT, brokers=(1, 9)))  # 9 is not live
    sent = {(c.broker_id, v.tp) for c in of_type(commands, C.SendLeaderAndIsr) for v in c.partitions}
    assert sent == {(1, tp("t", 0)), (1, tp("u", 0)), (1, tp("w", 0))}
    assert state.partitions == cluster().partitions  # nothing else changes until the broker answers


def test_replicas_reported_with_storage_errors_go_offline_and_lose_leadership():
    state, commands = run(cluster(), E.LeaderAndIsrResponded(at=AT, broker_id=1, errors=(
        (tp("t", 0), STORAGE), (tp("u", 0), STORAGE), (tp("w", 0), STORAGE))))
    t, u, w = leader_isr(state, "t", 0), leader_isr(state, "u", 0), leader_isr(state, "w", 0)
    assert (t.leader, t.isr) == (2, (2, 3))  # it led: elected elsewhere, out of the ISR
    assert (u.leader, u.isr) == (2, (2,))  # a follower: out of the ISR
    assert (w.leader, w.isr) == (-1, (1,)) and state.partitions[tp("w", 0)].state is PS.OFFLINE  # nobody else
    for topic in ("t", "u", "w"):
        assert state.partitions[tp(topic, 0)].replica_state(1) is RS.OFFLINE
    stopped = {v for c in of_type(commands, C.SendStopReplica) if c.broker_id == 1 for v in c.partitions}
    assert stopped == {tp("t", 0), tp("u", 0), tp("w", 0)}
    # the same report again changes nothing
    again, more = run(state, E.LeaderAndIsrResponded(at=AT, broker_id=1, errors=((tp("u", 0), STORAGE),)))
    assert again.partitions == state.partitions and of_type(more, C.WritePartitionStates) == []


def test_other_partition_errors_are_still_reported():
    _, commands = run(cluster(), E.LeaderAndIsrResponded(at=AT, broker_id=1, errors=(
        (tp("t", 0), "UNKNOWN_SERVER_ERROR"), (tp("u", 0), STORAGE))))
    assert any("UNKNOWN_SERVER_ERROR" in str(c) for c in commands)


# -- rules 4: a reported replica stays offline for its partition (Kafka's replicasOnOfflineDirs) --

def _storage_errors(broker, *tps):
    return E.LeaderAndIsrResponded(at=AT, broker_id=broker, errors=tuple((t, STORAGE) for t in tps))


def _brokers(*ids, bounced=()):
    return E.BrokersChanged(at=AT, brokers=tuple(broker(b, epoch=200 + b if b in bounced else None) for b in ids))


def _stranded(rules):
    """w-0 has replicas 1 and 2 but only 1 in its ISR (2 fell behind), and broker 1's disk
    holding w-0 fails: w-0 goes Offline, nobody else being in sync."""
    config = ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False, rules=rules)
    state, _ = elected(brokers=(1, 2, 3), topics={"w": [[1, 2]], "x": [[2, 3]]},
                       states={tp("w", 0): LeaderIsr(1, 0, (1,), 1, 0), tp("x", 0): LeaderIsr(2, 0, (2, 3), 1, 0)},
                       config=config)
    state, _ = run(state, _storage_errors(1, tp("w", 0)))
    assert leader_isr(state, "w", 0).leader == -1 and state.partitions[tp("w", 0)].state is PS.OFFLINE
    return state


def test_a_replica_on_a_failed_dir_is_not_elected_when_another_broker_joins():
    state = _stranded(rules=4)
    assert state.replicas_on_offline_dirs == {(tp("w", 0), 1)}
    after, commands = run(state, _brokers(1, 2, 3, 4))  # broker 4 joins: Offline partitions are retried
    assert leader_isr(after, "w", 0).leader == -1 and after.partitions[tp("w", 0)].state is PS.OFFLINE
    # the state-change log says why broker 1, live and in the ISR, was passed over
    refused = [e.detail for c in of_type(commands, C.LogStateChanges) for e in c.entries
               if not e.ok and tp("w", 0) in e.partitions]
    assert refused and all(d.endswith("; on a failed log dir: 1") for d in refused), refused
    assert not any(v.tp == tp("w", 0) and v.leader == 1
                   for c in of_type(commands, C.SendLeaderAndIsr) for v in c.partitions)
    # the decisions that wrote journals before rules 4 elected it again (and it failed again)
    old, _ = run(_stranded(rules=3), _brokers(1, 2, 3, 4))
    assert leader_isr(old, "w", 0).leader == 1


def test_its_broker_restarting_makes_it_electable_again():
    state = _stranded(rules=4)
    after, _ = run(state, _brokers(1, 2, 3, bounced=(1,)))  # broker 1 restarted with its disk replaced
    assert after.replicas_on_offline_dirs == frozenset()
    assert leader_isr(after, "w", 0).leader == 1 and after.partitions[tp("w", 0)].state is PS.ONLINE


def test_a_reported_replica_is_not_taken_by_an_unclean_election_either():
    # many partitions, so that the broker failure is decided over the columns unless a replica
    # is on a failed dir
    n = 40
    config = ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False, unclean_leader_election_enable=True)
    state, _ = elected(brokers=(1, 2, 3), topics={"u": [[1, 2]] * n, "v": [[3, 1]] * n}, config=config)
    reported = [tp("u", p) for p in range(0, n, 2)]
    state, _ = run(state, _storage_errors(2, *reported))  # followers: they leave the ISRs
    assert all(leader_isr(state, "u", p).isr == (1,) for p in range(0, n, 2))
    after, _ = run(state, _brokers(2, 3))  # broker 1, the last in-sync replica, fails
    for p in range(n):
        li = leader_isr(after, "u", p)
        if p % 2:
            assert li.leader == 2  # clean: 2 was in the ISR
        else:
            assert li.leader == -1 and after.partitions[tp("u", p)].state is PS.OFFLINE, (p, li)
    assert all(leader_isr(after, "v", p).leader == 3 for p in range(n))
    # broker 1 gone, its own pairs go; broker 2's stay while 2 is up
    assert after.replicas_on_offline_dirs == frozenset((t, 2) for t in reported)


def test_a_deleted_topic_takes_its_replicas_off_the_list_and_the_state_round_trips():
    state = _stranded(rules=4)
    assert codec.decode_state(codec.encode_state(state)) == state
    state, _ = run(state, E.TopicDeletionsRequested(at=AT, topics=frozenset({"w"})))
    # broker 1's replica of w-0 counts as dead: the deletion waits for the broker, as Kafka's does
    assert "w" in state.topics_ineligible_for_deletion
    state, _ = run(state, _brokers(1, 2, 3, bounced=(1,)))
    assert state.replicas_on_offline_dirs == frozenset()

