"""A broker failure decided over the columns gives exactly the state and the commands of the
scalar rules (brokers.on_broker_failure), on random clusters: healthy ones, where the columnar
path decides (with or without a topic queued for deletion, which it leaves to the deletion's
own rule), and any shape (empty ISRs, members that are not assigned, leaderless and New
partitions, unclean election allowed or not, refusals that re-read the ISR first), where it
must hand over to the scalar path untouched. The digest of the commands is compared too: it is
what the journal records."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import columnar_brokers
from controller_core import events as E
from controller_core.state import ControllerConfig
from controller_core.step import step
from controller_core.values import LeaderIsr

from .builders import AT, assert_same, both_paths, broker, elected, run, tp
from .test_columnar_failure import BROKERS, clusters


@st.composite
def healthy_clusters(draw):
    """Every partition has a live leader in its ISR; ISRs are assigned replicas."""
    topics, states = {}, {}
    for t in range(draw(st.integers(1, 4))):
        name = f"t{t}"
        parts = []
        for p in range(draw(st.integers(1, 8))):
            replicas = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True))
            parts.append(replicas)
            isr = draw(st.lists(st.sampled_from(replicas), min_size=1, max_size=len(replicas), unique=True))
            states[tp(name, p)] = LeaderIsr(draw(st.sampled_from(isr)), draw(st.integers(0, 5)), tuple(isr), 1,
                                            draw(st.integers(0, 9)))
        topics[name] = parts
    dying = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True))
    return topics, states, (), list(BROKERS), sorted(dying), draw(st.booleans())


def both_ways(cluster, to_delete=()):
    topics, states, configs, alive, dying, unclean_default = cluster
    config = ControllerConfig(broker_id=alive[0], auto_leader_rebalance_enable=False,
                              unclean_leader_election_enable=unclean_default)
    state, _ = elected(brokers=tuple(alive), topics=topics, states=states, config=config, topic_configs=configs,
                       topics_to_delete=frozenset(to_delete))
    if state.pending or state.rechecking:
        return None
    event = E.BrokersChanged(at=AT, brokers=tuple(broker(b) for b in alive if b not in dying))
    return both_paths(columnar_brokers, "on_broker_failure", lambda: step(state, event))


@settings(max_examples=150, deadline=None)
@given(healthy_clusters(), st.data())
def test_a_failure_in_a_healthy_cluster_is_decided_over_the_columns_as_the_rules_decide_it(cluster, data):
    topics = cluster[0]
    to_delete = data.draw(st.lists(st.sampled_from(sorted(topics)), max_size=2, unique=True), "to_delete")
    out = both_ways(cluster, to_delete)
    if out is None:
        return
    fast, slow, taken = out
    # every election, clean, unclean where allowed, or refused (re-reading the ISR first where
    # the rule does), is decided over the columns
    assert taken == [True]
    assert_same(fast, slow)


@settings(max_examples=100, deadline=None)
@given(clusters(), st.data())
def test_a_failure_with_topics_queued_for_deletion_gives_the_commands_of_the_rules(cluster, data):
    topics = cluster[0]
    to_delete = data.draw(st.lists(st.sampled_from(sorted(topics)), min_size=1, max_size=2, unique=True), "to_delete")
    out = both_ways(cluster, to_delete)
    if out is None:
        return
    fast, slow, _ = out
    assert_same(fast, slow)


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_a_failure_in_any_cluster_gives_the_commands_of_the_rules(cluster):
    out = both_ways(cluster)
    if out is None:
        return
    fast, slow, _ = out
    assert_same(fast, slow)


@settings(max_examples=100, deadline=None)
@given(healthy_clusters(), st.data())
def test_partitions_left_offline_and_refusals_re_read_are_decided_over_the_columns_as_by_the_rules(cluster, data):
    """Two failures in a row, each settled (writes landed, re-reads answered with the states
    the controller caches: ZooKeeper agrees): the first may refuse elections (every ISR member
    dead), which re-reads those ISRs and then leaves the partitions Offline; the second meets
    those Offline partitions and refuses them again. Both are decided over the columns (no
    unclean election allowed), with the rules' state, commands and digest."""
    topics, states, configs, alive, dying, _ = cluster
    survivors = [b for b in alive if b not in dying]
    later = data.draw(st.lists(st.sampled_from(survivors), max_size=2, unique=True), "later")
    config = ControllerConfig(broker_id=alive[0], auto_leader_rebalance_enable=False,
                              unclean_leader_election_enable=False)
    state, _ = elected(brokers=tuple(alive), topics=topics, states=states, config=config, topic_configs=configs)
    first = E.BrokersChanged(at=AT, brokers=tuple(broker(b) for b in survivors))
    second = E.BrokersChanged(at=AT, brokers=tuple(broker(b) for b in survivors if b not in later))

    firsts = []  # the commands of the first failure and its settling, per run (fast, then slow)

    def life():
        after, seen = run(state, first)
        firsts.append(seen)
        after, more = run(after, second)
        return after, seen + more

    fast, slow, taken = both_paths(columnar_brokers, "on_broker_failure", life)
    assert taken and all(taken)
    assert_same(fast, slow)
    # a refusal re-reads when a live replica is missing from the cached ISR (partitions.choose)
    re_read = any(all(r in dying for r in li.isr) and any(r not in dying and r not in li.isr
                                                           for r in topics[t.topic][t.partition])
                  for t, li in states.items())
    assert re_read == any(type(c).__name__ == "ReadPartitionStates" for c in firsts[0])


def bounce_of_broker_1():
    """Brokers 1 and 2; t-0 only on 1 (its leader), t-1 on 1 and 2 led by 1, t-2 on 2 and 1 led
    by 2. Returns the elected state and broker 1's re-registration (a new epoch)."""
    topics = {"t": [[1], [1, 2], [2, 1]]}
    states = {tp("t", 0): LeaderIsr(1, 4, (1,), 1, 7), tp("t", 1): LeaderIsr(1, 4, (1, 2), 1, 7),
              tp("t", 2): LeaderIsr(2, 4, (2, 1), 1, 7)}
    config = ControllerConfig(broker_id=2, auto_leader_rebalance_enable=False)
    state, _ = elected(brokers=(1, 2), topics=topics, states=states, config=config)
    return state, E.BrokersChanged(at=AT, brokers=(broker(1, epoch=999), broker(2)))


def test_a_bounce_writes_the_failures_columns_then_merges_the_startups_election_into_them():
    """Broker 1 re-registers (a new epoch): a failure and a startup in one step. The failure,
    over the columns, keeps its writes as columns (t-0 loses its only replica and its leader,
    t-1 elects broker 2, t-2 shrinks); the startup then elects t-0 again, over the columns too
    (test_columnar_online.py): the two changes merge into one write expecting the znode's
    version, as the rules alone write it."""
    from controller_core.partition_writes import PartitionWrites
    state, bounce = bounce_of_broker_1()
    fast, slow, taken = both_paths(columnar_brokers, "on_broker_failure", lambda: step(state, bounce))
    assert taken == [True]
    assert_same(fast, slow)
    [write] = [c for c in fast[1] if type(c).__name__ == "WritePartitionStates"]
    assert isinstance(write.writes, PartitionWrites)  # merged over the columns (PartitionWrites.then)
    by_tp = {w.tp: w for w in write.writes}
    assert [w.tp for w in write.writes] == [tp("t", 1), tp("t", 0), tp("t", 2)]  # elected first, as the rule
    assert by_tp[tp("t", 0)].expected_version == 7 and by_tp[tp("t", 0)].leader_isr.leader == 1


def test_a_failure_alone_hands_its_writes_to_the_command_as_columns():
    from controller_core.partition_writes import PartitionWrites
    topics = {"t": [[1, 2], [2, 1]]}
    states = {tp("t", 0): LeaderIsr(1, 4, (1, 2), 1, 7), tp("t", 1): LeaderIsr(2, 4, (2, 1), 1, 3)}
    config = ControllerConfig(broker_id=2, auto_leader_rebalance_enable=False)
    state, _ = elected(brokers=(1, 2), topics=topics, states=states, config=config)
    fast, slow, taken = both_paths(columnar_brokers, "on_broker_failure",
                                   lambda: step(state, E.BrokersChanged(at=AT, brokers=(broker(2),))))
    assert taken == [True]
    [write] = [c for c in fast[1] if type(c).__name__ == "WritePartitionStates"]
    assert isinstance(write.writes, PartitionWrites) and write.writes._writes is None  # (before any comparison)
    assert_same(fast, slow)
    assert write == [c for c in slow[1] if type(c).__name__ == "WritePartitionStates"][0]
    assert [(w.tp, w.leader_isr.leader, w.leader_isr.isr, w.expected_version) for w in write.writes] == [
        (tp("t", 0), 2, (2,), 7), (tp("t", 1), 2, (2,), 3)]


def test_a_failure_met_with_a_stale_isr_parks_before_building_the_rest_and_re_reads_in_partition_order(monkeypatch):
    """Broker 1 dies leading partitions whose cached ISR holds only it while replicas 2 and 3
    are live: the decision will be dropped for a re-read, so the columnar path stops at the
    election (no writes, requests or log built: `_batch` is never reached) and notes the
    partitions as the log's walk would, in partition order. Topic `a` is created after the
    election, so its rows come after `b`'s in the image: the order is the partitions', not the
    rows'. The parked state and the ReadPartitionStates are the rules' to the byte."""
    from controller_core import codec
    topics = {"b": [[1, 2, 3], [2, 1, 3], [1, 3, 2]]}
    states = {tp("b", 0): LeaderIsr(1, 4, (1,), 1, 7), tp("b", 1): LeaderIsr(2, 4, (2, 1), 1, 3),
              tp("b", 2): LeaderIsr(1, 2, (1, 3), 1, 5)}
    config = ControllerConfig(broker_id=2, auto_leader_rebalance_enable=False)
    state, _ = elected(brokers=(1, 2, 3), topics=topics, states=states, config=config)
    from controller_core.values import ReplicaAssignment
    state, _ = run(state, E.TopicsChanged(at=AT, topics=("a", "b"), assignments=(
        ("a", ((0, ReplicaAssignment((1, 2, 3))), (1, ReplicaAssignment((1, 2, 3))))),)))
    # the leaders of a's partitions shrank their ISRs to themselves (notifications the cache has)
    state, _ = run(state, E.PartitionStatesObserved(at=AT, states=(
        (tp("a", 0), LeaderIsr(1, 0, (1,), 2, 1)), (tp("a", 1), LeaderIsr(1, 0, (1,), 2, 1))), source="isr_change"))
    assert state.partitions.row(tp("a", 0)) > state.partitions.row(tp("b", 2))
    built = []
    monkeypatch.setattr(columnar_brokers, "_batch", lambda *a: built.append(1) or [])
    failure = E.BrokersChanged(at=AT, brokers=(broker(2), broker(3)))
    fast, slow, taken = both_paths(columnar_brokers, "on_broker_failure", lambda: step(state, failure))
    assert taken == [True] and not built
    assert_same(fast, slow)
    parked, commands = fast
    assert parked.rechecking == (failure,)
    [read] = commands
    assert read.partitions == (tp("a", 0), tp("a", 1), tp("b", 0))  # b-2 elects 3 from its ISR
    assert codec.reference_digest(commands) == codec.reference_digest(slow[1])


def test_a_bounce_met_with_a_stale_isr_is_not_cut_short_by_its_failure():
    """Broker 1 re-registers: its failure refuses t-0 (cached ISR [1], live replica 2 outside
    it), which parks the event; but the startup that follows in the same decision meets t-1
    (Offline since the failover: ISR [3], broker 3 dead) with broker 1 back and live outside
    its ISR, and adds it to the re-read. So a bounce's failure is not the decision's last part
    and must not stop it early: the re-read lists both, as the rules list them."""
    topics = {"t": [[1, 2], [1, 3]]}
    states = {tp("t", 0): LeaderIsr(1, 4, (1,), 1, 7), tp("t", 1): LeaderIsr(3, 4, (3,), 1, 2)}
    config = ControllerConfig(broker_id=2, auto_leader_rebalance_enable=False)
    state, _ = elected(brokers=(1, 2), topics=topics, states=states, config=config)
    assert state.partitions[tp("t", 1)].state.name == "OFFLINE"
    bounce = E.BrokersChanged(at=AT, brokers=(broker(1, epoch=999), broker(2)))
    fast, slow, taken = both_paths(columnar_brokers, "on_broker_failure", lambda: step(state, bounce))
    assert taken == [True]
    assert_same(fast, slow)
    [read] = fast[1]
    assert read.partitions == (tp("t", 0), tp("t", 1))
