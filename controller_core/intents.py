"""The core's small vocabularies: why a partition-state write was made, how a leader is chosen,
and the timers the core schedules.

They are `StrEnum`s on purpose. Their members are the very strings journals have always held
(in a parked outbox's intents inside a snapshot, in `ScheduleTimer` and `TimerFired` records),
so a member encodes to today's text, a string decoded from an old journal compares and hashes
equal to its member, and the commands' digests do not change. What the enums add is a closed
set: a misspelt intent or strategy is an AttributeError where it is written, not a write that
no retry recognises.

A write intent is a tuple whose first item is a `WriteIntent`: `(INIT,)`, `(ELECT, strategy)`,
`(SHRINK, replica)` or `(BUMP,)`; the outbox keeps each written partition's intents so that a
conflicted write can be decided again on fresh data (`outcomes._reapply`).
"""
from __future__ import annotations

import enum


class WriteIntent(enum.StrEnum):
    """What a partition-state write was for (the first item of an intent tuple)."""

    INIT = "init"
    """A new partition's first leader and ISR (NewPartition -> OnlinePartition)."""
    ELECT = "elect"
    """A leader election; the tuple's second item is the `Strategy`."""
    SHRINK = "shrink"
    """A replica removed from the ISR; the tuple's second item is the replica."""
    BUMP = "bump"
    """The same leader and ISR with a new leader epoch (a reassignment's new assignment)."""


class Strategy(enum.StrEnum):
    """Kafka's four leader-election strategies, plus the admin's unclean election."""

    OFFLINE = "offline"
    OFFLINE_UNCLEAN = "offline-unclean"
    """An ElectLeaders(UNCLEAN) request: unclean election allowed whatever the topic's config."""
    REASSIGN = "reassign"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled-shutdown"


class Timer(enum.StrEnum):
    """Names of the timers the core schedules (`ScheduleTimer`, `TimerFired`)."""

    REBALANCE = "auto-leader-rebalance"
    """The automatic preferred-leader rebalance (`leader.imbalance.check.interval.seconds`)."""
