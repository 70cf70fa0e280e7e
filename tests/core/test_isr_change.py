"""An ISR change decided without a draft (controller_core/isr_change.py) gives exactly the state
and the commands, and so the digest, of the drafted handler (`step._observed`), on random
clusters: partitions being reassigned, topics queued for deletion, brokers shutting down or all
gone, partitions without a state; and on random events: several partitions, states older, equal
or newer than the cached ones, absent znodes, unknown and repeated partitions, values the columns
cannot hold, the reassignment watch's source. Where the path declines, the draft decides alone."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import codec, isr_change
from controller_core import events as E
from controller_core.state import ControllerConfig
from controller_core.step import step
from controller_core.values import LeaderIsr

from .builders import AT, assert_same, both_paths, elected, run, tp

BROKERS = (1, 2, 3, 4, 5)


@st.composite
def clusters(draw, healthy: bool = False):
    """An elected controller, writes settled. `healthy`: every broker alive, no reassignment,
    every partition with a state (the path must then decide every ISR change)."""
    alive = BROKERS if healthy else tuple(sorted(draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=5,
                                                                unique=True))))
    topics, states = {}, {}
    for t in range(draw(st.integers(1, 3))):
        name = f"t{t}"
        parts = []
        for p in range(draw(st.integers(1, 6))):
            replicas = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True))
            parts.append(replicas)
            if not healthy and draw(st.integers(0, 7)) == 0:
                continue  # no state znode yet
            isr = draw(st.lists(st.sampled_from(replicas), min_size=1, max_size=len(replicas), unique=True))
            states[tp(name, p)] = LeaderIsr(draw(st.sampled_from(isr)), draw(st.integers(0, 3)), tuple(isr), 1,
                                            draw(st.integers(0, 5)))
        topics[name] = parts
    deleting = frozenset(draw(st.lists(st.sampled_from(sorted(topics)), max_size=1)))
    reassignment = None
    if not healthy and draw(st.booleans()):
        t = draw(st.sampled_from(sorted(topics)))
        p = draw(st.integers(0, len(topics[t]) - 1))
        target = tuple(draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True)))
        reassignment = E.ReassignmentRequested(at=AT, exists=True, partitions=((tp(t, p), target),))
    config = ControllerConfig(broker_id=alive[0], auto_leader_rebalance_enable=False)
    state, _ = elected(brokers=alive, topics=topics, states=states, config=config, topics_to_delete=deleting,
                       reassignment=reassignment)
    if not healthy:
        for b in draw(st.lists(st.sampled_from(alive), max_size=2, unique=True)):
            state, _ = run(state, E.ControlledShutdownRequested(at=AT, request_id=90 + b, broker_id=b,
                                                                broker_epoch=100 + b))
        if draw(st.integers(0, 9)) == 0:
            state, _ = run(state, E.BrokersChanged(at=AT, brokers=()))
    return state, topics


@st.composite
def changes(draw, state, topics, healthy: bool = False):
    """A `PartitionStatesObserved` of some of the cluster's partitions (see the module docstring)."""
    known = sorted(tp(t, p) for t, parts in topics.items() for p in range(len(parts)))
    chosen = draw(st.lists(st.sampled_from(known), min_size=1, max_size=4, unique=healthy))
    if not healthy and draw(st.integers(0, 5)) == 0:
        chosen.append(tp("gone", 0))
    states = []
    for x in chosen:
        info = state.partitions.get(x)
        cached = info.leader_isr if info is not None else None
        if not healthy and (cached is None or draw(st.integers(0, 7)) == 0):
            states.append((x, None if cached is None or draw(st.booleans()) else cached))
            continue
        replicas = info.assignment.replicas
        pool = st.sampled_from(replicas + ((draw(st.sampled_from(BROKERS)),) if not healthy else ()))
        isr = tuple(draw(st.lists(pool, max_size=4, unique=True)))
        if not healthy and draw(st.integers(0, 9)) == 0:
            isr = (1, 2, 3, 4, 5)  # wider than the image's matrices
        version = cached.zk_version + (1 if healthy else draw(st.integers(-1, 2)))
        if not healthy and draw(st.integers(0, 14)) == 0:
            version = 2 ** 40  # not an int32: the columns hold it in the odd map
        leader = draw(st.sampled_from(isr + (-1,))) if isr else -1
        states.append((x, LeaderIsr(leader, cached.leader_epoch + draw(st.integers(0, 1)), isr,
                                    cached.controller_epoch, version)))
    source = "isr_change" if healthy or draw(st.integers(0, 4)) else "reassignment"
    return E.PartitionStatesObserved(at=AT, states=tuple(states), source=source)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_an_isr_change_decides_as_the_draft_on_any_cluster(data):
    state, topics = data.draw(clusters())
    event = data.draw(changes(state, topics))
    fast, slow, taken = both_paths(isr_change, "decide", lambda: step(state, event))
    assert_same(fast, slow)
    assert len(taken) <= 1


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_on_a_healthy_cluster_the_path_decides_every_isr_change(data):
    state, topics = data.draw(clusters(healthy=True))
    event = data.draw(changes(state, topics, healthy=True))
    fast, slow, taken = both_paths(isr_change, "decide", lambda: step(state, event))
    assert taken and taken[0] is not None, "a plain ISR change is decided without the draft"
    assert_same(fast, slow)
    (new, commands), _ = fast, slow
    assert len(commands) == len(new.brokers)  # one UpdateMetadata per broker, every change in it
    assert {x for x, _ in event.states} == {v.tp for v in commands[0].partitions}
    assert codec.digest(commands) == codec.reference_digest(commands)


def test_a_newer_state_reaches_every_broker_and_an_older_one_nothing():
    state, _ = elected(brokers=(1, 2, 3), topics={"t": [[1, 2, 3], [2, 3, 1]]})
    cached = state.partitions[tp("t", 0)].leader_isr
    shrunk = LeaderIsr(cached.leader, cached.leader_epoch, cached.isr[:2], cached.controller_epoch,
                       cached.zk_version + 1)
    new, commands = step(state, E.PartitionStatesObserved(at=AT, states=((tp("t", 0), shrunk),)))
    assert new.partitions[tp("t", 0)].leader_isr == shrunk
    assert new.partitions[tp("t", 1)] == state.partitions[tp("t", 1)]
    assert [c.broker_id for c in commands] == [1, 2, 3]
    assert all(c.partitions == commands[0].partitions and c.partitions[0].isr == shrunk.isr for c in commands)
    assert step(new, E.PartitionStatesObserved(at=AT, states=((tp("t", 0), cached),))) == (new, ())


def test_a_reassigning_partitions_isr_change_is_decided_without_the_draft_until_it_completes():
    """t-0 moves from (1, 2, 3) to (4, 5, 1): while 4 and 5 catch up, each ISR change (from the
    ISR-change notification or the reassignment's own watch) only refreshes the cache, and the
    notification's tells every broker; the change that brings the last target replica into the
    ISR completes the reassignment, which the draft decides."""
    move = E.ReassignmentRequested(at=AT, exists=True, partitions=((tp("t", 0), (4, 5, 1)),))
    state, _ = elected(brokers=(1, 2, 3, 4, 5), topics={"t": [[1, 2, 3]]}, reassignment=move)
    assert tp("t", 0) in state.reassigning
    cached = state.partitions[tp("t", 0)].leader_isr
    for source in ("isr_change", "reassignment"):
        for isr, completes in (((1, 2, 3, 4), False), ((1, 2, 3, 4, 5), True)):
            li = LeaderIsr(cached.leader, cached.leader_epoch, isr, cached.controller_epoch, cached.zk_version + 1)
            event = E.PartitionStatesObserved(at=AT, states=((tp("t", 0), li),), source=source)
            fast, slow, taken = both_paths(isr_change, "decide", lambda: step(state, event))
            assert_same(fast, slow)
            assert (taken[0] is None) == completes, (source, isr)
            if not completes:
                new, commands = fast
                assert new.partitions[tp("t", 0)].leader_isr == li and tp("t", 0) in new.reassigning
                assert len(commands) == (5 if source == "isr_change" else 0)
