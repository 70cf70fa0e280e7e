"""Brokers leave and come back (BrokersChanged): leaders move, epochs bump, ISRs shrink, offline
partitions and unclean elections, a bounced broker."""
from controller_core import commands as C
from controller_core import events as E
from controller_core.machines import PartitionState as PS
from controller_core.machines import ReplicaState as RS
from controller_core.step import step
from controller_core.values import LeaderIsr

from .builders import AT, elected, leader_isr, of_type, run, tp
from .flows import brokers_changed, sent_to


def test_broker_failure_moves_leaders_bumps_epochs_and_shrinks_isr():
    state, _ = elected(topics={"t": [[1, 2, 3], [2, 3, 1]]})
    state, commands = step(state, brokers_changed(2, 3))
    write = of_type(commands, C.WritePartitionStates)[0]
    assert {w.tp: w.leader_isr for w in write.writes} == {
        tp("t", 0): LeaderIsr(2, 1, (2, 3), 2, 1),  # leader moved, epoch + 1
        tp("t", 1): LeaderIsr(2, 1, (2, 3), 2, 1),  # follower left the ISR, epoch + 1 (Kafka 2.4)
    }
    # nothing goes to brokers before the writes land
    assert not of_type(commands, C.SendLeaderAndIsr)
    state, released = step(state, E.PartitionStatesWritten(
        at=AT, write_id=write.write_id, versions=((tp("t", 0), 1), (tp("t", 1), 1))))
    lai = sent_to(released, C.SendLeaderAndIsr)
    assert set(lai) == {2, 3}  # never to the dead broker
    assert [p.tp for p in lai[2].partitions] == [tp("t", 0), tp("t", 1)]
    assert set(sent_to(released, C.SendUpdateMetadata)) == {2, 3}
    assert state.partitions[tp("t", 0)].state is PS.ONLINE
    assert state.partitions[tp("t", 1)].replica_state(1) is RS.OFFLINE
    assert not state.pending


def test_partition_without_live_in_sync_replica_goes_offline_and_keeps_its_last_isr_member():
    state, _ = elected(topics={"t": [[1, 2]]}, states={tp("t", 0): LeaderIsr(1, 5, (1,), 1, 3)})
    state, commands = run(state, brokers_changed(2, 3))
    assert state.partitions[tp("t", 0)].state is PS.OFFLINE
    assert leader_isr(state, "t", 0) == LeaderIsr(-1, 6, (1,), 2, 4)


def test_unclean_election_only_when_the_topic_allows_it():
    given = elected(topics={"t": [[1, 2]]}, states={tp("t", 0): LeaderIsr(1, 5, (1,), 1, 3)})[0]
    state, _ = run(given, brokers_changed(2, 3))
    assert state.partitions[tp("t", 0)].state is PS.OFFLINE
    state, commands = run(state, E.TopicConfigsChanged(at=AT, configs=(("t", (("unclean.leader.election.enable", "true"),)),)))
    assert leader_isr(state, "t", 0).leader == 2 and leader_isr(state, "t", 0).isr == (2,)
    log = [e for c in of_type(commands, C.LogStateChanges) for e in c.entries if e.detail == "unclean leader election"]
    assert [e.partitions for e in log] == [(tp("t", 0),)]


def test_broker_return_brings_replicas_online_and_elects_offline_partitions():
    given = elected(topics={"t": [[1]]})[0]
    state, _ = run(given, brokers_changed(2, 3))
    assert state.partitions[tp("t", 0)].state is PS.OFFLINE
    state, commands = run(state, brokers_changed(1, 2, 3, epochs={1: 500}))
    assert state.partitions[tp("t", 0)].state is PS.ONLINE
    assert leader_isr(state, "t", 0).leader == 1
    assert state.partitions[tp("t", 0)].replica_state(1) is RS.ONLINE
    assert sent_to(commands, C.SendLeaderAndIsr)[1].broker_epoch == 500


def test_bounced_broker_is_failed_then_started():
    given = elected(topics={"t": [[1, 2, 3]]})[0]
    state, commands = run(given, brokers_changed(1, 2, 3, epochs={1: 999}))
    assert state.brokers[1].epoch == 999
    assert leader_isr(state, "t", 0).leader == 2  # it lost leadership while "down"
    assert state.partitions[tp("t", 0)].replica_state(1) is RS.ONLINE


def test_same_listing_is_a_no_op():
    given = elected(topics={"t": [[1, 2, 3]]})[0]
    state, commands = step(given, brokers_changed(1, 2, 3))
    assert commands == () and state == given
