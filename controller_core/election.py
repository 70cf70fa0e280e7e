"""Kafka 2.4's four partition-leader election rules, as pure functions.

Each returns `(leader, new_isr, unclean)` or None when no leader can be chosen. Counting unclean
elections, writing the result and telling brokers are the caller's business; nothing here has a
side effect. `live` is the set of brokers that count as online for the rule.
"""
from __future__ import annotations

from typing import Collection

Election = tuple[int, tuple[int, ...], bool]


def offline(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: Collection[int], unclean_allowed: bool
) -> Election | None:
    """OfflinePartitionLeaderElectionStrategy: the first live in-ISR replica in assignment order;
    failing that, and only if the topic allows unclean election, the first live replica, and the
    ISR becomes just that leader."""
    for replica in assignment:
        if replica in live and replica in isr:
            return replica, tuple([r for r in isr if r in live]), False
    if unclean_allowed:
        for replica in assignment:
            if replica in live:
                return replica, (replica,), True
    return None


def reassign(target: tuple[int, ...], isr: tuple[int, ...], live: Collection[int]) -> Election | None:
    """ReassignPartitionLeaderElectionStrategy: the first live in-ISR replica of the target
    replica set; the ISR is unchanged."""
    for replica in target:
        if replica in live and replica in isr:
            return replica, isr, False
    return None


def preferred(assignment: tuple[int, ...], isr: tuple[int, ...], live: Collection[int]) -> Election | None:
    """PreferredReplicaPartitionLeaderElectionStrategy: the first assigned replica, only if it is
    live and in the ISR; the ISR is unchanged."""
    if assignment:
        head = assignment[0]
        if head in live and head in isr:
            return head, isr, False
    return None


def controlled_shutdown(
    assignment: tuple[int, ...],
    isr: tuple[int, ...],
    live_or_shutting_down: Collection[int],
    shutting_down: Collection[int],
) -> Election | None:
    """ControlledShutdownPartitionLeaderElectionStrategy: the first in-ISR replica that is live
    and not shutting down; the shutting-down brokers leave the ISR."""
    for replica in assignment:
        if replica in live_or_shutting_down and replica in isr and replica not in shutting_down:
            return replica, tuple(r for r in isr if r not in shutting_down), False
    return None
