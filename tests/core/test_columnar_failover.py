"""A new controller's start of the state machines filled from the columns gives exactly the
state and commands of the walk in `failover.on_elected`, on random snapshots: healthy clusters,
where the columnar path must decide, and any cluster (partitions without a state, dead brokers,
ISR members that are not assigned, leaders that are not live), where it must leave the draft
untouched for the walk. Commands are compared with their digest, which the journal records."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import columnar_failover
from controller_core import events as E
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import LeaderIsr

from .builders import AT, assert_same, both_paths, run, snapshot, tp
from .test_columnar_failure import BROKERS, clusters


@st.composite
def healthy_clusters(draw):
    """Every partition has a state whose ISR is assigned; brokers may have died with the old
    controller, and a partition whose leader died may or may not keep a live ISR member."""
    alive = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=len(BROKERS), unique=True))
    dying = draw(st.lists(st.sampled_from(alive), max_size=len(alive) - 1, unique=True))
    topics, states = {}, {}
    for t in range(draw(st.integers(1, 4))):
        name = f"t{t}"
        parts = []
        for p in range(draw(st.integers(1, 8))):
            replicas = draw(st.lists(st.sampled_from(alive), min_size=1, max_size=4, unique=True))
            parts.append(replicas)
            isr = draw(st.lists(st.sampled_from(replicas), min_size=1, max_size=len(replicas), unique=True))
            leader = draw(st.sampled_from(isr + replicas))  # (a leader outside its ISR, as a hand-edit leaves it)
            states[tp(name, p)] = LeaderIsr(leader, draw(st.integers(0, 5)), tuple(isr), draw(st.integers(0, 3)),
                                            draw(st.integers(0, 9)))
        topics[name] = parts
    return topics, states, (), sorted(alive), sorted(dying), draw(st.booleans())


def both_ways(cluster, epoch=2, to_delete=()):
    topics, states, configs, alive, dying, unclean_default = cluster
    config = ControllerConfig(broker_id=alive[0], auto_leader_rebalance_enable=False,
                              unclean_leader_election_enable=unclean_default)
    event = E.ControllerElected(at=AT, epoch=epoch, epoch_zk_version=epoch - 1, snapshot=snapshot(
        tuple(b for b in alive if b not in dying), topics, states, topic_configs=configs,
        topics_to_delete=frozenset(to_delete)))
    return both_paths(columnar_failover, "start_machines", lambda: step(initial_state(config), event))


@settings(max_examples=100, deadline=None)
@given(healthy_clusters(), st.integers(2, 4))
def test_a_cluster_with_states_is_started_over_the_columns_as_the_walk_starts_it(cluster, epoch):
    fast, slow, taken = both_ways(cluster, epoch)
    newer = any(li.controller_epoch > epoch for li in cluster[1].values())  # refused one by one: the walk
    assert taken == [not newer]  # (elections without a live ISR member too: unclean, or refused)
    assert_same(fast, slow)


@settings(max_examples=100, deadline=None)
@given(healthy_clusters(), st.data())
def test_topics_queued_for_deletion_are_told_their_state_and_left_out_of_the_rest(cluster, data):
    """The walk tells a deleting topic's live replicas its state and neither shrinks nor elects
    it; the columns do the same, so a queued deletion no longer sends a whole cluster's start
    down the walk."""
    topics, states = cluster[:2]
    to_delete = data.draw(st.lists(st.sampled_from(sorted(topics)), min_size=1, max_size=2, unique=True), "to_delete")
    fast, slow, taken = both_ways(cluster, 2, to_delete)
    kept = {t: li for t, li in states.items() if t.topic not in to_delete}
    assert taken == [not any(li.controller_epoch > 2 for li in kept.values())]
    assert_same(fast, slow)


@settings(max_examples=100, deadline=None)
@given(healthy_clusters())
def test_refused_and_unclean_elections_are_final_at_a_start_over_the_columns_as_in_the_walk(cluster):
    """Settled (writes landed): a new controller's refusals are final (its ISRs were just read
    from ZooKeeper; no re-read), and an unclean election takes the first live replica where
    allowed, over the columns as in the walk."""
    topics, states, configs, alive, dying, unclean = cluster
    config = ControllerConfig(broker_id=alive[0], auto_leader_rebalance_enable=False,
                              unclean_leader_election_enable=unclean)
    event = E.ControllerElected(at=AT, epoch=4, epoch_zk_version=3, snapshot=snapshot(
        tuple(b for b in alive if b not in dying), topics, states, topic_configs=configs))
    fast, slow, taken = both_paths(columnar_failover, "start_machines", lambda: run(initial_state(config), event))
    assert taken == [True]
    assert_same(fast, slow)
    assert not any(type(c).__name__ == "ReadPartitionStates" for c in fast[1])
    lines = [(e.detail, e.ok) for c in fast[1] if type(c).__name__ == "LogStateChanges" for e in c.entries]
    stranded = [t for t, li in states.items() if li.leader in dying and all(r in dying for r in li.isr)
                and any(r not in dying for r in topics[t.topic][t.partition])]
    if stranded:
        assert (("unclean leader election", True) if unclean else ("no eligible leader", False)) in [
            (d[:len("no eligible leader")] if not ok else d, ok) for d, ok in lines]


@settings(max_examples=150, deadline=None)
@given(healthy_clusters(), st.data())
def test_partitions_without_a_state_are_initialized_over_the_columns_as_the_walk_initializes_them(cluster, data):
    """A new controller finds topics whose state znodes were never written (a predecessor died
    between the topic's creation and its first election): the walk initializes each (the first
    live replica leads, the live replicas are the ISR, the znode created) in partition order
    among the offline elections, or refuses it when no replica is alive. The columns decide the
    same, with or without a topic queued for deletion."""
    topics, states = cluster[:2]
    dropped = data.draw(st.lists(st.sampled_from(sorted(states)), min_size=1, unique=True), "without a state")
    states = {t: li for t, li in states.items() if t not in dropped}
    to_delete = data.draw(st.lists(st.sampled_from(sorted(topics)), max_size=1, unique=True), "to_delete")
    fast, slow, taken = both_ways((topics, states) + cluster[2:], 3, to_delete)
    kept = {t: li for t, li in states.items() if t.topic not in to_delete}
    assert taken == [not any(li.controller_epoch > 3 for li in kept.values())]
    assert_same(fast, slow)
    assert fast[0].partitions.keys() == slow[0].partitions.keys()


def test_a_partition_without_a_state_and_no_live_replica_is_refused_as_the_walk_refuses_it():
    topics = {"t0": [[1, 2], [5], [5, 2]]}  # t0-1: its only replica is dead
    states = {tp("t0", 0): LeaderIsr(1, 0, (1, 2), 1, 0)}
    fast, slow, taken = both_ways((topics, states, (), [1, 2, 5], [5], False))
    assert taken == [True]
    assert_same(fast, slow)
    lines = [(e.from_state, e.partitions, e.ok, e.detail) for c in fast[1] if type(c).__name__ == "LogStateChanges"
             for e in c.entries if e.to_state == "OnlinePartition"]
    assert lines == [("NewPartition", (tp("t0", 1),), False, "no assigned replica is alive"),
                     ("NewPartition", (tp("t0", 2),), True, "")]
    write = next(c for c in fast[1] if type(c).__name__ == "WritePartitionStates")
    created = {w.tp: w for w in write.writes if w.expected_version == -1}
    assert set(created) == {tp("t0", 2)} and created[tp("t0", 2)].leader_isr == LeaderIsr(2, 0, (2,), 2, 0)


@settings(max_examples=100, deadline=None)
@given(clusters(), st.data())
def test_any_cluster_gives_the_commands_of_the_walk_with_or_without_deletions(cluster, data):
    to_delete = data.draw(st.lists(st.sampled_from(sorted(cluster[0])), max_size=2, unique=True), "to_delete")
    fast, slow, _ = both_ways(cluster, 2, to_delete)
    assert_same(fast, slow)


@settings(max_examples=100, deadline=None)
@given(clusters())
def test_any_cluster_gives_the_commands_of_the_walk(cluster):
    fast, slow, _ = both_ways(cluster)
    assert_same(fast, slow)


def test_writes_keep_the_walks_order_shrinks_before_elections():
    """t0-0 only elects (its dead leader is not in the ISR), t0-1 only shrinks: the walk shrinks
    first (the dead replicas), then elects, so t0-1's write comes first despite the sort."""
    topics = {"t0": [[5, 1, 2], [1, 5]]}
    states = {tp("t0", 0): LeaderIsr(5, 0, (1, 2), 1, 0), tp("t0", 1): LeaderIsr(1, 0, (1, 5), 1, 0)}
    fast, slow, taken = both_ways((topics, states, (), [1, 2, 5], [5], False))
    assert taken == [True]
    assert_same(fast, slow)
    write = next(c for c in fast[1] if type(c).__name__ == "WritePartitionStates")
    assert [w.tp for w in write.writes] == [tp("t0", 1), tp("t0", 0)]


def test_a_deleting_topics_dead_replica_leaves_the_isr_after_every_other_partitions_writes():
    """Found by Hypothesis: t0 and t1 (queued for deletion, sorted first) lose their only
    replica with the old controller, as does t2's leader. The walk writes t2-0 first (its
    replicas go Offline, then it elects) and t0-0, t1-0 in the deletion's resumption; the
    columns shrank every partition's ISR at once, deletions' too, and wrote t0-0 first."""
    cluster = ({"t0": [[1]], "t1": [[1]], "t2": [[1, 2]]},
               {tp("t0", 0): LeaderIsr(1, 0, (1,), 0, 0), tp("t1", 0): LeaderIsr(1, 0, (1,), 0, 0),
                tp("t2", 0): LeaderIsr(1, 0, (1, 2), 0, 0)},
               (), [1, 2], [1], False)
    fast, slow, taken = both_ways(cluster, 2, ["t0", "t1"])
    assert taken == [True]
    assert_same(fast, slow)
    [write] = [c for c in fast[1] if type(c).__name__ == "WritePartitionStates"]
    assert [str(w.tp) for w in write.writes] == ["t2-0", "t0-0", "t1-0"]


@st.composite
def clusters_with_a_stranded_isr_member(draw):
    """Healthy clusters where some partitions keep, as their only ISR member, a replica a
    reassignment removed (the generated journals' controllers met thousands of these): leaderless,
    or led by an assigned replica, or by an unassigned one (the ISR member itself, or a live
    broker: then the walk's repair acts, and the start must be left to it)."""
    topics, states, configs, alive, dying, unclean = draw(healthy_clusters())
    outside = [b for b in BROKERS if all(b not in r for parts in topics.values() for r in parts)] or [99]
    for key in draw(st.lists(st.sampled_from(sorted(states)), min_size=1, unique=True)):
        li = states[key]
        member = draw(st.sampled_from(outside + list(alive)))
        replicas = topics[key.topic][key.partition]
        if member in replicas:
            member = 99
        leader = draw(st.sampled_from([-1, replicas[0], 98] + [b for b in alive if b not in replicas]))
        states[key] = LeaderIsr(leader, li.leader_epoch, (member,), li.controller_epoch, li.zk_version)
    return topics, states, configs, alive, dying, unclean


@settings(max_examples=100, deadline=None)
@given(clusters_with_a_stranded_isr_member(), st.integers(2, 4))
def test_an_isr_member_a_reassignment_removed_does_not_send_the_start_down_the_walk(cluster, epoch):
    fast, slow, taken = both_ways(cluster, epoch)
    newer = any(li.controller_epoch > epoch for li in cluster[1].values())
    live = set(cluster[3]) - set(cluster[4])
    repaired = any(li.isr[0] not in cluster[0][key.topic][key.partition]
                   and (li.leader == li.isr[0] or li.leader in live - set(cluster[0][key.topic][key.partition]))
                   for key, li in cluster[1].items())
    assert taken == [not newer and not repaired]
    assert_same(fast, slow)
