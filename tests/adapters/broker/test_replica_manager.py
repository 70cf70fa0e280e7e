"""The simulated replica manager: local replica state and Kafka 2.4 ISR upkeep, on values and a
fake clock (no I/O)."""
from __future__ import annotations

import pytest

from adapters.broker.replica_manager import (
    ROLE_FOLLOWER,
    ROLE_LEADER,
    ROLE_STOPPED,
    IsrProposal,
    ReplicaManager,
    ReplicaManagerBase,
    SimulatedReplicaManager,
)
from controller_core.values import LeaderIsr, PartitionView, TopicPartition

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
LAG = 1000
CATCH_UP = 300


class FakeClock:
    def __init__(self, now: float = 10_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> None:
        self.now += ms


def view(leader=1, epoch=0, isr=(1, 2, 3), replicas=(1, 2, 3), zk_version=0, controller_epoch=1, tp=TP):
    return PartitionView(tp, leader, epoch, tuple(isr), controller_epoch, zk_version, tuple(replicas))


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def rm(clock):
    return SimulatedReplicaManager(1, replica_lag_time_max_ms=LAG, catch_up_delay_ms=CATCH_UP, clock=clock)


# -- replica transitions -----------------------------------------------------------------------


def test_protocol_is_satisfied_by_both_managers():
    class Mine(ReplicaManagerBase):
        def become_leader(self, view): ...
        def become_follower(self, view): ...
        def stop_replica(self, tp, delete): ...
        def partitions(self): return {}

    assert isinstance(SimulatedReplicaManager(1), ReplicaManager)
    assert isinstance(Mine(), ReplicaManager)
    assert Mine().isr_proposals() == [] and Mine().next_isr_deadline() is None


def test_become_leader_then_follower_then_stop_and_delete(rm):
    rm.become_leader(view(epoch=3, zk_version=5))
    s = rm.partition(TP)
    assert (s.role, s.leader, s.leader_epoch, s.zk_version, s.isr, s.replicas) == \
        (ROLE_LEADER, 1, 3, 5, (1, 2, 3), (1, 2, 3))
    assert rm.append(TP, 5) == 5

    rm.become_follower(view(leader=2, epoch=4, isr=(2, 3), zk_version=6))
    s = rm.partition(TP)
    assert (s.role, s.leader, s.leader_epoch, s.isr, s.log_end_offset) == (ROLE_FOLLOWER, 2, 4, (2, 3), 5)
    with pytest.raises(ValueError):
        rm.append(TP)

    rm.stop_replica(TP, delete=False)
    assert rm.partition(TP).role == ROLE_STOPPED
    assert rm.partition(TP).leader_epoch == 4  # kept: an old LeaderAndIsr must stay stale
    rm.stop_replica(TP, delete=True)
    assert rm.partition(TP) is None and rm.partitions() == {}
    rm.stop_replica(TopicPartition("unknown", 0), delete=True)  # unknown partitions are fine


def test_no_isr_change_before_liveness_is_known(rm, clock):
    rm.become_leader(view(isr=(1,)))
    clock.advance(100 * LAG)
    assert rm.next_isr_deadline() is None
    assert rm.isr_proposals() == []


# -- joining ---------------------------------------------------------------------------------------


def test_live_follower_joins_after_the_catch_up_delay(rm, clock):
    rm.update_live_brokers(frozenset({1, 2, 3}))
    rm.become_leader(view(isr=(1,), zk_version=7, controller_epoch=4, epoch=2))
    start = clock.now
    assert rm.next_isr_deadline() == start + CATCH_UP
    clock.advance(CATCH_UP - 1)
    assert rm.isr_proposals() == []
    clock.advance(1)
    [p] = rm.isr_proposals()
    assert p == IsrProposal(TP, LeaderIsr(1, 2, (1, 2, 3), 4, 7), added=(2, 3), removed=())
    assert rm.next_isr_deadline() is None  # one proposal outstanding per partition
    assert rm.isr_proposals() == []
    rm.isr_committed(p, 8)
    s = rm.partition(TP)
    assert (s.isr, s.zk_version, s.leader_epoch) == ((1, 2, 3), 8, 2)
    assert rm.next_isr_deadline() is None
    clock.advance(10 * LAG)
    assert rm.isr_proposals() == []


def test_catch_up_counts_from_when_the_follower_became_live(rm, clock):
    rm.update_live_brokers(frozenset({1}))
    rm.become_leader(view(isr=(1,)))
    clock.advance(5000)
    assert rm.isr_proposals() == []
    rm.update_live_brokers(frozenset({1, 3}))
    assert rm.next_isr_deadline() == clock.now + CATCH_UP
    clock.advance(CATCH_UP)
    [p] = rm.isr_proposals()
    assert p.leader_isr.isr == (1, 3) and p.added == (3,)


def test_follower_added_to_the_assignment_joins_after_the_delay(rm, clock):
    rm.update_live_brokers(frozenset({1, 2, 3, 4}))
    rm.become_leader(view(epoch=0, isr=(1, 2, 3), replicas=(1, 2, 3)))
    clock.advance(5000)
    assert rm.isr_proposals() == []
    # reassignment {1,2,3} -> {2,3,4}: RS = 2,3,4,1 with 4 adding
    rm.become_leader(view(epoch=1, isr=(1, 2, 3), replicas=(2, 3, 4, 1), zk_version=1))
    clock.advance(CATCH_UP)
    [p] = rm.isr_proposals()
    assert p.leader_isr.isr == (1, 2, 3, 4) and p.leader_isr.leader_epoch == 1 and p.leader_isr.zk_version == 1


def test_offline_target_never_joins_until_it_returns(rm, clock):
    rm.update_live_brokers(frozenset({1, 2, 3}))
    rm.become_leader(view(isr=(1, 2, 3), replicas=(2, 3, 4, 1)))
    clock.advance(10 * LAG)
    assert rm.isr_proposals() == [] and rm.next_isr_deadline() is None
    rm.update_live_brokers(frozenset({1, 2, 3, 4}))
    clock.advance(CATCH_UP)
    [p] = rm.isr_proposals()
    assert p.added == (4,)


def test_a_follower_listed_offline_rejoins_once_an_update_no_longer_lists_it(rm, clock):
    """UpdateMetadata's offline replicas, listed then no longer listed (an update listing nothing
    must still clear what an earlier one listed)."""
    rm.update_live_brokers(frozenset({1, 2, 3, 4}))
    rm.become_leader(view(isr=(1, 2, 3), replicas=(1, 2, 3, 4)))
    rm.update_offline_replicas([TP], {TP: frozenset({4})})
    clock.advance(10 * LAG)
    assert rm.isr_proposals() == []
    rm.update_offline_replicas([TP1], {})  # another partition's update: 4 stays offline for TP
    clock.advance(10 * LAG)
    assert rm.isr_proposals() == []
    rm.update_offline_replicas([TP], {})
    clock.advance(CATCH_UP)
    [p] = rm.isr_proposals()
    assert p.added == (4,)


# -- shrinking ---------------------------------------------------------------------------------------


def test_follower_that_leaves_is_dropped_after_the_lag_time(rm, clock):
    rm.update_live_brokers(frozenset({1, 2, 3}))
    rm.become_leader(view(isr=(1, 2, 3)))
    clock.advance(100)
    rm.update_live_brokers(frozenset({1, 2}))
    assert rm.next_isr_deadline() == clock.now + LAG
    clock.advance(LAG - 1)
    assert rm.isr_proposals() == []
    clock.advance(1)
    [p] = rm.isr_proposals()
    assert (p.leader_isr.isr, p.removed, p.added) == ((1, 2), (3,), ())


def test_the_leader_is_never_removed_and_the_isr_never_empties(rm, clock):
    rm.update_live_brokers(frozenset({2, 3}))  # even the leader's own broker missing from metadata
    rm.become_leader(view(isr=(1, 2, 3)))
    rm.update_live_brokers(frozenset())
    clock.advance(LAG)
    [p] = rm.isr_proposals()
    assert p.leader_isr.isr == (1,)
    rm.isr_committed(p, 1)
    clock.advance(100 * LAG)
    assert rm.isr_proposals() == [] and rm.next_isr_deadline() is None
    assert rm.partition(TP).isr == (1,)


def test_a_follower_that_returns_before_the_lag_time_stays(rm, clock):
    rm.update_live_brokers(frozenset({1, 2, 3}))
    rm.become_leader(view(isr=(1, 2, 3)))
    rm.update_live_brokers(frozenset({1, 2}))
    clock.advance(LAG - 10)
    rm.update_live_brokers(frozenset({1, 2, 3}))
    clock.advance(10 * LAG)
    assert rm.isr_proposals() == [] and rm.next_isr_deadline() is None


def test_joins_and_drops_due_together_make_one_proposal(rm, clock):
    rm.update_live_brokers(frozenset({1, 2, 3}))
    rm.become_leader(view(isr=(1, 2), replicas=(1, 2, 3)))
    rm.update_live_brokers(frozenset({1, 3}))  # 2 goes, 3 is live but out of the ISR
    clock.advance(LAG)
    [p] = rm.isr_proposals()
    assert (p.leader_isr.isr, p.added, p.removed) == ((1, 3), (3,), (2,))


def test_replica_in_controlled_shutdown_does_not_rejoin_while_its_broker_lives(rm, clock):
    # controlled shutdown of broker 3: the controller takes it out of the ISR, and the broker's
    # UpdateMetadata names it as shutting down, so the leader no longer counts it as fetching
    rm.update_live_brokers(frozenset({1, 2, 3}))
    rm.become_leader(view(epoch=0, isr=(1, 2, 3)))
    rm.update_live_brokers(frozenset({1, 2}))  # (live - shutting down), as adapters/broker/broker.py passes it
    rm.become_leader(view(epoch=1, isr=(1, 2), zk_version=1))
    clock.advance(10 * LAG)
    assert rm.isr_proposals() == [] and rm.next_isr_deadline() is None
    # it exits, restarts and comes back: then it catches up again
    rm.update_live_brokers(frozenset({1, 2, 3}))
    clock.advance(CATCH_UP)
    [p] = rm.isr_proposals()
    assert p.added == (3,)


def test_new_leader_does_not_re_add_the_shut_down_old_leader(rm, clock):
    # broker 1 was a follower; broker 2 (the old leader) shuts down, the controller elects 1
    rm.update_live_brokers(frozenset({1, 2, 3}))
    rm.become_follower(view(leader=2, epoch=0, isr=(2, 1, 3)))
    rm.update_live_brokers(frozenset({1, 3}))  # broker 2 is shutting down
    rm.become_leader(view(leader=1, epoch=1, isr=(1, 3), zk_version=1))
    clock.advance(10 * LAG)
    assert rm.isr_proposals() == []


def test_unclean_leader_lets_live_followers_outside_the_isr_join(rm, clock):
    rm.update_live_brokers(frozenset({1, 3}))
    rm.become_follower(view(leader=2, epoch=0, isr=(2,)))
    rm.become_leader(view(leader=1, epoch=1, isr=(1,), zk_version=1))
    clock.advance(CATCH_UP)
    [p] = rm.isr_proposals()
    assert p.leader_isr.isr == (1, 3)


# -- outcomes of the writes --------------------------------------------------------------------------


def _one_join(rm, clock):
    rm.update_live_brokers(frozenset({1, 2}))
    rm.become_leader(view(isr=(1,), replicas=(1, 2), epoch=5, zk_version=3, controller_epoch=2))
    clock.advance(CATCH_UP)
    [p] = rm.isr_proposals()
    return p


def test_conflict_with_a_newer_leader_epoch_stops_leading(rm, clock):
    p = _one_join(rm, clock)
    rm.isr_conflict(p, LeaderIsr(2, 6, (2,), 3, 4))
    s = rm.partition(TP)
    assert (s.role, s.leader, s.leader_epoch, s.isr) == (ROLE_FOLLOWER, 2, 5, (1,))
    clock.advance(100 * LAG)
    assert rm.isr_proposals() == [] and rm.next_isr_deadline() is None


def test_conflict_with_a_missing_znode_stops_leading(rm, clock):
    p = _one_join(rm, clock)
    rm.isr_conflict(p, None)
    assert rm.partition(TP).role == ROLE_FOLLOWER
    assert rm.next_isr_deadline() is None


def test_conflict_with_our_own_earlier_write_is_adopted(rm, clock):
    p = _one_join(rm, clock)
    rm.isr_conflict(p, LeaderIsr(1, 5, (1, 2), 2, 4))
    s = rm.partition(TP)
    assert (s.role, s.isr, s.zk_version) == (ROLE_LEADER, (1, 2), 4)
    assert rm.isr_proposals() == []


def test_unexplained_conflict_blocks_until_the_next_leader_and_isr(rm, clock):
    p = _one_join(rm, clock)
    rm.isr_conflict(p, LeaderIsr(1, 5, (1,), 9, 4))  # same epoch, another controller epoch
    clock.advance(100 * LAG)
    assert rm.isr_proposals() == [] and rm.next_isr_deadline() is None
    assert rm.partition(TP).role == ROLE_LEADER
    rm.become_leader(view(isr=(1,), replicas=(1, 2), epoch=6, zk_version=5))
    clock.advance(CATCH_UP)
    [p] = rm.isr_proposals()
    assert p.leader_isr.zk_version == 5


def test_failed_write_is_proposed_again_after_a_backoff(rm, clock):
    p = _one_join(rm, clock)
    rm.isr_write_failed(p)
    assert rm.isr_proposals() == []
    assert rm.next_isr_deadline() == clock.now + rm.retry_backoff_ms
    clock.advance(rm.retry_backoff_ms)
    assert rm.isr_proposals() == [p]


def test_outcomes_for_a_superseded_epoch_are_ignored(rm, clock):
    p = _one_join(rm, clock)
    rm.become_leader(view(isr=(1,), replicas=(1, 2), epoch=6, zk_version=9))  # LeaderAndIsr meanwhile
    rm.isr_committed(p, 4)
    s = rm.partition(TP)
    assert (s.isr, s.zk_version, s.leader_epoch) == ((1,), 9, 6)
    rm.isr_conflict(p, None)
    assert rm.partition(TP).role == ROLE_LEADER


def test_followers_and_stopped_replicas_never_propose(rm, clock):
    rm.update_live_brokers(frozenset({1, 2, 3}))
    rm.become_follower(view(leader=2, isr=(2,)))
    rm.become_leader(view(tp=TP1, isr=(1,)))
    rm.stop_replica(TP1, delete=False)
    clock.advance(100 * LAG)
    assert rm.isr_proposals() == [] and rm.next_isr_deadline() is None


def test_many_partitions_are_scheduled_independently(rm, clock):
    rm.update_live_brokers(frozenset({1, 2}))
    rm.become_leader(view(tp=TP, isr=(1,), replicas=(1, 2)))
    clock.advance(100)
    rm.become_leader(view(tp=TP1, isr=(1,), replicas=(1, 2)))
    clock.advance(CATCH_UP - 100)
    assert [p.tp for p in rm.isr_proposals()] == [TP]
    assert rm.next_isr_deadline() == clock.now + 100
    clock.advance(100)
    assert [p.tp for p in rm.isr_proposals()] == [TP1]


def test_role_counts(rm):
    rm.become_leader(view(tp=TP))
    rm.become_follower(view(tp=TP1, leader=2))
    rm.become_follower(view(tp=TopicPartition("u", 0), leader=2))
    rm.stop_replica(TopicPartition("u", 0), delete=False)
    assert rm.role_counts() == {ROLE_LEADER: 1, ROLE_FOLLOWER: 1, ROLE_STOPPED: 1}


def test_a_follower_taken_out_of_the_isr_is_not_re_added_before_an_update_metadata_says_it_is_live(rm, clock):
    # the controller removes 3 (dead) and sends LeaderAndIsr, then UpdateMetadata: in between,
    # the previous UpdateMetadata still calls 3 live, but a dead follower does not fetch
    rm.update_live_brokers(frozenset({1, 2, 3}))
    rm.become_leader(view(epoch=0, isr=(1, 2, 3)))
    rm.become_leader(view(epoch=1, isr=(1, 2), zk_version=1))
    clock.advance(CATCH_UP)
    assert rm.isr_proposals() == []
    rm.update_live_brokers(frozenset({1, 2}))  # the same decision's UpdateMetadata
    clock.advance(CATCH_UP)
    assert rm.isr_proposals() == []


def test_isr_removal_decided_while_a_broker_was_dead_does_not_stop_it_after_it_returned(rm, clock):
    # the removal of 3 was decided while it was dead; 3 has returned since and an UpdateMetadata
    # after the removal says so (the controller decides one event at a time and each broker's
    # requests arrive in order, so that UpdateMetadata always follows the removal)
    rm.update_live_brokers(frozenset({1, 2, 3}))
    rm.become_leader(view(epoch=0, isr=(1, 2, 3)))
    rm.become_leader(view(epoch=1, isr=(1, 2), zk_version=1))
    rm.update_live_brokers(frozenset({1, 2, 3}))
    clock.advance(CATCH_UP)
    [p] = rm.isr_proposals()
    assert p.added == (3,)


def test_followers_share_empty_leader_bookkeeping_and_a_leader_gets_its_own():
    """A follower replica holds the shared read-only empties (a broker has tens of thousands of
    them: two sets each were 430 bytes and two objects for the collector to walk); becoming
    leader gives it containers of its own, and leading again after following starts clean."""
    from adapters.broker import replica_manager as rmod

    rm = SimulatedReplicaManager(1, clock=lambda: 0.0)
    rm.update_live_brokers(frozenset({1, 2, 3}))
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    for tp in (a, b):
        rm.become_follower(PartitionView(tp, 2, 1, (2, 1, 3), 1, 0, (2, 1, 3)))
    ra, rb = rm._replicas[a], rm._replicas[b]
    assert ra.followers is rb.followers is rmod._NO_FOLLOWERS and ra.stopped is rb.removed is rmod._NONE
    with pytest.raises(TypeError):
        ra.followers[2] = None  # read-only: a follower never records followers
    rm.become_leader(PartitionView(a, 1, 2, (1, 3), 1, 1, (2, 1, 3)))  # 2 left the ISR with this epoch
    assert ra.followers is not rmod._NO_FOLLOWERS and set(ra.followers) == {2, 3}
    assert ra.removed == {2} and rb.removed is rmod._NONE
    rm.update_live_brokers(frozenset({1, 3}))
    rm.update_live_brokers(frozenset({1, 2, 3}))  # seen live after its removal: it fetches again
    assert ra.removed == frozenset() and ra.followers[2].fetching
    rm.become_follower(PartitionView(a, 3, 3, (3, 1), 1, 2, (2, 1, 3)))
    assert ra.followers is rmod._NO_FOLLOWERS and ra.removed is rmod._NONE
