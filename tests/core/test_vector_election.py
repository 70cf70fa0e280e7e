"""The vectorized election rules agree with the scalar rules of `election.py`, row by row, on
random clusters: empty ISRs, offline replicas, ISR members that are no longer assigned (a
half-done reassignment), reassignments in flight (wide replica lists), unclean allowed or not."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import election
from controller_core import vector_election as V
from controller_core.columns import PAD

BROKERS = list(range(1, 9))


@st.composite
def partitions(draw):
    """(replicas, isr) rows: replicas distinct, 0-6 of them; ISR mostly from the replicas, in any
    order, sometimes empty, sometimes holding a broker that is not assigned."""
    n = draw(st.integers(0, 30))
    rows = []
    for _ in range(n):
        replicas = draw(st.lists(st.sampled_from(BROKERS), min_size=0, max_size=6, unique=True))
        pool = replicas + draw(st.lists(st.sampled_from(BROKERS), max_size=2))
        isr = draw(st.lists(st.sampled_from(pool), max_size=6, unique=True)) if pool else []
        rows.append((tuple(replicas), tuple(isr)))
    return rows


def matrix(rows, width=None):
    width = width if width is not None else max([1] + [len(r) for r in rows])
    m = np.full((len(rows), width), PAD, np.int32)
    for i, r in enumerate(rows):
        m[i, :len(r)] = r
    return m


brokers_subset = st.frozensets(st.sampled_from(BROKERS))


@settings(max_examples=150, deadline=None)
@given(partitions(), brokers_subset, st.data())
def test_offline_election_agrees_with_the_scalar_rule(rows, live, data):
    unclean = data.draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows)))
    width = max([1] + [len(r) for r, _ in rows] + [len(i) for _, i in rows])
    ok, leader, isr, was_unclean = V.offline(matrix([r for r, _ in rows], width), matrix([i for _, i in rows], width),
                                             live, np.array(unclean, bool))
    for k, (replicas, current) in enumerate(rows):
        expected = election.offline(replicas, current, live, unclean[k])
        if expected is None:
            assert not ok[k] and leader[k] == PAD and V.row(isr, k) == ()
        else:
            assert ok[k]
            assert (int(leader[k]), V.row(isr, k), bool(was_unclean[k])) == expected


@settings(max_examples=150, deadline=None)
@given(partitions(), brokers_subset, brokers_subset)
def test_controlled_shutdown_election_agrees_with_the_scalar_rule(rows, everyone, shutting_down):
    width = max([1] + [len(r) for r, _ in rows] + [len(i) for _, i in rows])
    ok, leader, isr = V.controlled_shutdown(matrix([r for r, _ in rows], width), matrix([i for _, i in rows], width),
                                            everyone, shutting_down)
    for k, (replicas, current) in enumerate(rows):
        expected = election.controlled_shutdown(replicas, current, everyone, shutting_down)
        if expected is None:
            assert not ok[k]
        else:
            assert ok[k]
            assert (int(leader[k]), V.row(isr, k), False) == expected


@settings(max_examples=150, deadline=None)
@given(partitions(), brokers_subset)
def test_preferred_election_agrees_with_the_scalar_rule(rows, live):
    width = max([1] + [len(r) for r, _ in rows] + [len(i) for _, i in rows])
    ok, leader, isr = V.preferred(matrix([r for r, _ in rows], width), matrix([i for _, i in rows], width), live)
    for k, (replicas, current) in enumerate(rows):
        expected = election.preferred(replicas, current, live)
        if expected is None:
            assert not ok[k]
        else:
            assert ok[k]
            assert (int(leader[k]), V.row(isr, k), False) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from(BROKERS + [-1])), max_size=40), brokers_subset)
def test_led_by_is_the_rows_whose_leader_is_one_of_the_brokers(rows, brokers):
    has = np.array([h for h, _ in rows], bool)
    leader = np.array([l for _, l in rows], np.int32)
    mask = V.led_by(leader, has, brokers)
    assert mask.tolist() == [h and l in brokers for h, l in rows]


def test_an_offline_election_with_nobody_alive_elects_nobody_even_unclean():
    ok, leader, isr, unclean = V.offline(matrix([(1, 2, 3)]), matrix([(1, 2, 3)]), set(), np.array([True]))
    assert not ok[0] and not unclean[0] and leader[0] == PAD
