"""Kafka 2.4's four leader-election rules, table-driven: (assignment, isr, live, ...) -> result."""
import pytest

from controller_core import election


@pytest.mark.parametrize("assignment,isr,live,unclean,expected", [
    # first live in-ISR replica in assignment order; the ISR keeps its live members
    ((1, 2, 3), (1, 2, 3), {1, 2, 3}, False, (1, (1, 2, 3), False)),
    ((1, 2, 3), (1, 2, 3), {2, 3}, False, (2, (2, 3), False)),
    ((1, 2, 3), (3, 2), {2, 3}, False, (2, (3, 2), False)),  # assignment order, not ISR order
    ((1, 2, 3), (1,), {2, 3}, False, None),  # no live ISR member and unclean disallowed
    ((1, 2, 3), (1,), {2, 3}, True, (2, (2,), True)),  # unclean: first live replica, ISR = leader
    ((1, 2, 3), (1,), set(), True, None),
    ((4, 5), (4, 5), {5}, False, (5, (5,), False)),
])
def test_offline(assignment, isr, live, unclean, expected):
    assert election.offline(assignment, isr, live, unclean) == expected


@pytest.mark.parametrize("target,isr,live,expected", [
    ((2, 3, 4), (1, 2, 3, 4), {1, 2, 3, 4}, (2, (1, 2, 3, 4), False)),
    ((2, 3, 4), (1, 3, 4), {1, 2, 3, 4}, (3, (1, 3, 4), False)),  # 2 not in ISR
    ((2, 3, 4), (1, 2, 3, 4), {1, 3, 4}, (3, (1, 2, 3, 4), False)),  # 2 not live; ISR untouched
    ((2, 3, 4), (1,), {1, 2, 3, 4}, None),
])
def test_reassign(target, isr, live, expected):
    assert election.reassign(target, isr, live) == expected


@pytest.mark.parametrize("assignment,isr,live,expected", [
    ((1, 2, 3), (2, 3, 1), {1, 2, 3}, (1, (2, 3, 1), False)),
    ((1, 2, 3), (2, 3), {1, 2, 3}, None),  # preferred not in ISR
    ((1, 2, 3), (1, 2, 3), {2, 3}, None),  # preferred not live
    ((), (), {1}, None),
])
def test_preferred(assignment, isr, live, expected):
    assert election.preferred(assignment, isr, live) == expected


@pytest.mark.parametrize("assignment,isr,everyone,shutting,expected", [
    ((1, 2, 3), (1, 2, 3), {1, 2, 3}, {1}, (2, (2, 3), False)),
    ((1, 2, 3), (1, 3), {1, 2, 3}, {1}, (3, (3,), False)),
    ((1, 2, 3), (1, 2, 3), {1, 2, 3}, {1, 2}, (3, (3,), False)),
    ((1, 2, 3), (1,), {1, 2, 3}, {1}, None),  # nobody else in sync: the broker keeps leading
    ((1, 2), (1, 2), {1}, {1}, None),  # the only other replica is dead
])
def test_controlled_shutdown(assignment, isr, everyone, shutting, expected):
    assert election.controlled_shutdown(assignment, isr, everyone, shutting) == expected
