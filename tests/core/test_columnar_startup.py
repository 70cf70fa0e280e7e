"""A broker startup decided over the columns (columnar_startup.replicas_online) gives exactly the
state and the commands of the rule (replicas.move of every replica on the new brokers to
OnlineReplica), digest included, on random clusters: brokers coming back to a cluster that
elected without them, with or without another broker failing in the same change, partitions
without a state, leaderless ones, topics queued for deletion (where the rule decides)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import columnar_startup
from controller_core import events as E
from controller_core.state import ControllerConfig
from controller_core.step import step

from .builders import AT, assert_same, both_paths, broker, elected
from .test_columnar_failure import clusters


@st.composite
def comebacks(draw):
    """A cluster elected while `joining` were down; the change brings them back, and with
    `also_dying`, takes others away in the same listing."""
    topics, states, configs, alive, dying, unclean = draw(clusters())
    joining = dying
    up = [b for b in alive if b not in joining]
    also_dying = draw(st.lists(st.sampled_from(up), max_size=len(up) - 1, unique=True)) if draw(st.booleans()) else []
    to_delete = draw(st.lists(st.sampled_from(sorted(topics)), max_size=1, unique=True))
    return topics, states, configs, up, joining, sorted(also_dying), unclean, to_delete


def _settled(state) -> bool:
    return not (state.pending or state.rechecking or not state.active)


def _elected_without_them(case):
    """The cluster of a comeback, elected while the joining brokers were down (None if a write
    or re-read is left open)."""
    topics, states, configs, up, _, _, unclean, to_delete = case
    config = ControllerConfig(broker_id=up[0], auto_leader_rebalance_enable=False,
                              unclean_leader_election_enable=unclean)
    state, _ = elected(brokers=tuple(up), topics=topics, states=states, config=config, topic_configs=configs,
                       topics_to_delete=frozenset(to_delete))
    return state if _settled(state) else None


def both_ways(case, module=columnar_startup, entry="replicas_online", before=None):
    """The comeback's `step()` with the columnar path `module.<entry>` and without it; `before`
    (state -> state) runs after the election (None if a write or re-read is left open)."""
    _, _, _, up, joining, also_dying, _, _ = case
    state = _elected_without_them(case)
    if state is None:
        return None
    if before is not None:
        state = before(state)
        if not _settled(state):
            return None
    listing = tuple(broker(b) for b in sorted(set(up) - set(also_dying) | set(joining)))
    event = E.BrokersChanged(at=AT, brokers=listing)
    return both_paths(module, entry, lambda: step(state, event))


@settings(max_examples=200, deadline=None)
@given(comebacks())
def test_brokers_coming_back_get_the_commands_and_state_of_the_rule(case):
    out = both_ways(case)
    if out is None:
        return
    fast, slow, _ = out
    assert_same(fast, slow)


@settings(max_examples=150, deadline=None)
@given(comebacks(), st.data())
def test_brokers_coming_back_to_partitions_being_moved_onto_them_get_the_commands_and_state_of_the_rule(case, data):
    """As above, after a reassignment (settled) that moves partitions onto the down brokers: their
    replicas there are NewReplica when the brokers come back."""
    from .builders import run, tp
    topics, _, _, up, joining, _, _, _ = case

    def reassign(state):
        every = [tp(t, p) for t, parts in sorted(topics.items()) for p in range(len(parts))]
        moved = data.draw(st.lists(st.sampled_from(every), min_size=1, max_size=4, unique=True))
        targets = tuple((x, tuple(data.draw(st.lists(st.sampled_from(sorted(set(up) | set(joining))), min_size=1,
                                                      max_size=3, unique=True)))) for x in moved)
        return run(state, E.ReassignmentRequested(at=AT, exists=True, partitions=targets))[0]

    out = both_ways(case, before=reassign)
    if out is None:
        return
    fast, slow, _ = out
    assert_same(fast, slow)


def test_a_healthy_comeback_is_decided_over_the_columns():
    topics = {"a": [[1, 2, 3], [2, 3, 1], [3, 1, 2]], "b": [[1, 2], [2, 1]]}
    from controller_core.values import LeaderIsr
    from .builders import tp
    states = {tp("a", 0): LeaderIsr(2, 1, (2, 3), 1, 0), tp("a", 1): LeaderIsr(2, 1, (2, 3), 1, 0),
              tp("a", 2): LeaderIsr(3, 1, (3, 2), 1, 0), tp("b", 0): LeaderIsr(2, 1, (2,), 1, 0),
              tp("b", 1): LeaderIsr(2, 1, (2,), 1, 0)}
    out = both_ways((topics, states, (), [2, 3], [1], [], False, []))
    assert out is not None
    fast, slow, taken = out
    assert taken == [[tp("a", 0), tp("a", 1), tp("a", 2), tp("b", 0), tp("b", 1)]]
    assert_same(fast, slow)
    commands = fast[1]
    lai = [c for c in commands if type(c).__name__ == "SendLeaderAndIsr" and c.broker_id == 1]
    assert lai and sorted((p.tp.topic, p.tp.partition) for p in lai[0].partitions) == [
        ("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]


def test_a_comeback_with_a_topic_queued_for_deletion_is_decided_over_the_columns_and_resumes_it():
    """Broker 1 died with the old controller: the replicas of `b` (queued for deletion) on it are
    DeletionIneligible, and `b`'s deletion waits for it. Its return moves them Online over the
    columns, and the deletion resumes (StopReplica with delete) as the rule resumes it."""
    from controller_core.values import LeaderIsr
    from .builders import tp
    topics = {"a": [[1, 2], [2, 1]], "b": [[1, 2], [2, 1]]}
    states = {tp(t, p): LeaderIsr(2, 1, (2,), 1, 0) for t in topics for p in (0, 1)}
    out = both_ways((topics, states, (), [2, 3], [1], [], False, ["b"]))
    assert out is not None
    fast, slow, taken = out
    assert taken and taken[0] is not None
    assert_same(fast, slow)
    from .builders import settle
    _, commands = settle(*fast)  # (the requests follow the write of the elections)
    stops = [c for c in commands if type(c).__name__ == "SendStopReplica" and c.delete]
    assert stops, "the deletion of b resumes once its replicas are back"


def test_a_comeback_meeting_a_deleted_replica_refuses_it_over_the_columns_as_the_rule_does():
    """`b` is queued for deletion; broker 1 answered its StopReplica (delete), broker 2 not yet.
    Then broker 1 bounces (a new registration epoch: a failure and a startup in one change). Its
    replica of `b` is DeletionSuccessful, which may not go Online: the columnar path logs the
    illegal transition and leaves the replica as it is, as the rule does, and moves the others."""
    from controller_core.machines import ReplicaState
    from controller_core.values import LeaderIsr
    from .builders import run, tp
    topics = {"a": [[1, 2], [2, 1]], "b": [[1, 2]]}
    states = {tp("a", 0): LeaderIsr(1, 1, (1, 2), 1, 0), tp("a", 1): LeaderIsr(2, 1, (2, 1), 1, 0),
              tp("b", 0): LeaderIsr(1, 1, (1, 2), 1, 0)}
    config = ControllerConfig(broker_id=2, auto_leader_rebalance_enable=False)
    state, _ = elected(brokers=(1, 2), topics=topics, states=states, config=config, topics_to_delete=frozenset({"b"}))
    state, _ = run(state, E.StopReplicaResponded(at=AT, broker_id=1, delete=True, partitions=(tp("b", 0),)))
    assert state.partitions[tp("b", 0)].replica_state(1) is ReplicaState.DELETION_SUCCESSFUL
    event = E.BrokersChanged(at=AT, brokers=(broker(1, epoch=500), broker(2)))
    fast, slow, taken = both_paths(columnar_startup, "replicas_online", lambda: step(state, event))
    assert taken and taken[-1] is not None  # decided over the columns
    assert_same(fast, slow)
    after = fast[0].partitions
    assert after[tp("b", 0)].replica_state(1) is ReplicaState.DELETION_SUCCESSFUL
    assert after[tp("a", 0)].replica_state(1) is ReplicaState.ONLINE
    lines = [e for c in fast[1] if type(c).__name__ == "LogStateChanges" for e in c.entries]
    assert any(getattr(e, "detail", "") == "illegal transition" for e in lines), lines


def test_new_replicas_a_reassignment_added_on_a_down_broker_go_online_over_the_columns_as_the_rule_moves_them():
    """Partitions of `a` are being moved onto broker 1 while it is down: its replicas stay
    NewReplica. When it comes back they go Online (New -> Online: no LeaderAndIsr for them), over
    the columns, with the same state and commands as the rule; the other replicas on broker 1
    (Offline -> Online) are sent theirs."""
    from controller_core.machines import ReplicaState
    from controller_core.values import LeaderIsr
    from .builders import run, tp
    topics = {"a": [[2, 3], [3, 2]], "b": [[1, 2]]}
    states = {tp("a", 0): LeaderIsr(2, 1, (2, 3), 1, 0), tp("a", 1): LeaderIsr(3, 1, (3, 2), 1, 0),
              tp("b", 0): LeaderIsr(2, 1, (2,), 1, 0)}
    config = ControllerConfig(broker_id=2, auto_leader_rebalance_enable=False)
    state, _ = elected(brokers=(2, 3), topics=topics, states=states, config=config)
    state, _ = run(state, E.ReassignmentRequested(at=AT, exists=True,
                                                  partitions=((tp("a", 0), (1, 2, 3)), (tp("a", 1), (3, 1)))))
    assert state.partitions[tp("a", 0)].replica_state(1) is ReplicaState.NEW
    assert state.partitions[tp("a", 1)].replica_state(1) is ReplicaState.NEW
    event = E.BrokersChanged(at=AT, brokers=(broker(1, epoch=500), broker(2), broker(3)))
    fast, slow, taken = both_paths(columnar_startup, "replicas_online", lambda: step(state, event))
    assert taken and taken[0] is not None  # decided over the columns
    assert_same(fast, slow)
    after = fast[0].partitions
    assert after[tp("a", 0)].replica_state(1) is ReplicaState.ONLINE
    assert after[tp("b", 0)].replica_state(1) is ReplicaState.ONLINE


@settings(max_examples=100, deadline=None)
@given(comebacks())
def test_replicas_going_online_over_the_columns_ask_for_the_rules_update_metadata_list(case):
    """A startup asks for UpdateMetadata of every partition before its replicas go online, so the
    partitions the move itself sends (each one sent a LeaderAndIsr) are only listed when a draft
    has not: then, in the rule's order, as `replicas.move` lists them."""
    from controller_core import replicas as R
    from controller_core.draft import Draft
    from controller_core.machines import ReplicaState

    state = _elected_without_them(case)
    if state is None:
        return
    joining = case[4]
    fast, slow = Draft(state, cause="test"), Draft(state, cause="test")
    new = frozenset(joining)
    if columnar_startup.replicas_online(fast, new) is None:
        return  # (declined: the rule decides)
    R.move(slow, R.replicas_on(slow, new), ReplicaState.ONLINE)
    assert not fast.requests.um_all and not slow.requests.um_all
    assert fast.requests.um_tps.tps() == slow.requests.um_tps.tps()
    assert fast.requests.um_everyone == slow.requests.um_everyone
    assert {b: p.tps() for b, p in fast.requests.lai.items()} == {b: p.tps() for b, p in slow.requests.lai.items()}
