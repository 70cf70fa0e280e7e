"""Every New or Offline partition brought Online over the columns (columnar_online.elect_waiting)
gives exactly the state and the commands of the rule (partitions.trigger_online_state_change),
digest included, on random clusters: brokers coming back to a cluster that lost every replica of
some partitions, partitions without a state, refusals (noted for a re-read where the cached ISR
may explain them), unclean elections where a topic allows them, topics queued for deletion."""
from __future__ import annotations

from hypothesis import given, settings

from controller_core import columnar_online
from controller_core import commands as C
from controller_core.values import LeaderIsr

from .builders import assert_same, tp
from .test_columnar_startup import both_ways as startup_both_ways
from .test_columnar_startup import comebacks


def both_ways(case):
    return startup_both_ways(case, columnar_online, "elect_waiting")


@settings(max_examples=250, deadline=None)
@given(comebacks())
def test_brokers_coming_back_elect_what_the_rule_elects(case):
    out = both_ways(case)
    if out is None:
        return
    fast, slow, _ = out
    assert_same(fast, slow)


def test_partitions_that_lost_every_replica_are_elected_or_initialized_over_the_columns_when_one_returns():
    """Broker 1 was down when this controller was elected: `a-0` (only on 1) stayed Offline,
    `b-0` (never written, only on 1) stayed New, `a-1` (only on 3, which stays down) stays
    refused. Broker 1's return elects `a-0` and initializes `b-0` over the columns; `a-1` is
    refused again, and no live replica is missing from its cached ISR, so no re-read."""
    topics = {"a": [[1], [3], [2]], "b": [[1]]}
    states = {tp("a", 0): LeaderIsr(1, 4, (1,), 1, 7), tp("a", 1): LeaderIsr(3, 2, (3,), 1, 2),
              tp("a", 2): LeaderIsr(2, 0, (2,), 1, 0)}
    out = both_ways((topics, states, (), [2], [1], [], False, []))
    assert out is not None
    fast, slow, taken = out
    assert taken == [True]
    assert_same(fast, slow)
    (write,) = [c for c in fast[1] if isinstance(c, C.WritePartitionStates)]
    # (the new controller, epoch 2, had already taken dead 1 out as a-0's leader: version 8)
    assert {w.tp: (w.leader_isr, w.expected_version) for w in write.writes} == {
        tp("a", 0): (LeaderIsr(1, 6, (1,), 2, 9), 8), tp("b", 0): (LeaderIsr(1, 0, (1,), 2, 0), -1)}
    lines = [(e.from_state, e.partitions, e.ok, e.detail) for c in fast[1] if isinstance(c, C.LogStateChanges)
             for e in c.entries if e.to_state == "OnlinePartition"]
    assert lines == [("OfflinePartition", (tp("a", 0),), True, ""),
                     ("OfflinePartition", (tp("a", 1),), False, "no eligible leader under the offline strategy (isr [3])"),
                     ("NewPartition", (tp("b", 0),), True, "")]
    assert not [c for c in fast[1] if isinstance(c, C.ReadPartitionStates)]


def test_a_refusal_a_live_replica_outside_the_cached_isr_may_explain_is_re_read_first():
    """`a-1` is on 1 and 3; its cached ISR is [3] and 3 stays down. When 1 returns, the rule
    would refuse on the cached ISR, but 1 may have rejoined it meanwhile: the whole decision
    waits for the state znode (ReadPartitionStates), over the columns as in the rule."""
    topics = {"a": [[1], [1, 3], [2]]}
    states = {tp("a", 0): LeaderIsr(1, 4, (1,), 1, 7), tp("a", 1): LeaderIsr(3, 2, (3,), 1, 2),
              tp("a", 2): LeaderIsr(2, 0, (2,), 1, 0)}
    out = both_ways((topics, states, (), [2], [1], [], False, []))
    fast, slow, taken = out
    assert taken == [True]
    assert_same(fast, slow)
    (read,) = [c for c in fast[1] if isinstance(c, C.ReadPartitionStates)]
    assert read.partitions == (tp("a", 1),) and not [c for c in fast[1] if isinstance(c, C.WritePartitionStates)]
