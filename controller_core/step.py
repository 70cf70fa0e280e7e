"""The controller's one entry point: `step(state, event) -> (state, commands)`.

A dispatcher: each event type goes to its subdomain handler, which works on a `Draft` of the
state. A node that is not the controller ignores everything but its election (and answers
broker requests with NOT_CONTROLLER), like Kafka's `if (!isActive) return`.

One decision at a time. Kafka's controller blocks on its ZooKeeper writes, so every decision
starts from partition states that ZooKeeper has confirmed. Our writes are asynchronous, so the
same rule is kept here, in the core: while a decision's partition-state write is in flight
(`state.pending`), every other event waits in `state.deferred`, and the write's outcome
(`PartitionStatesWritten`) is decided first, followed by the waiting events in arrival order.
Only the outcome itself and the events that end the term (`ControllerResigned`,
`ControllerFenced`) are never deferred. Chaining decisions on predicted znode versions, which
an earlier version did, let a conflict on one write undo or alias a later one; deferring costs
at most one ZooKeeper round trip of latency per event and keeps the journal replayable, since
the deferral is part of the state.

No refusal on a stale ISR. A partition leader changes the ISR itself and tells the controller
through a notification that may still be queued behind the request that needs it (an operator
asks for a preferred election right after the preferred replica rejoined). A decision that
would refuse an election because a replica the rule could take is not in the cached ISR is
therefore not applied: the state is left as it was, the partitions' state znodes are re-read
(`ReadPartitionStates`), and the same event is decided again on what ZooKeeper holds once
`PartitionStatesRechecked` brings them back, this time for good. Elections that succeed need
no such read: their writes are conditional on the znode version, and a conflict is re-decided
on the znode's content (`outcomes.py`). The re-read and the event waiting for it are part of
the state and of the journal, so the replay re-executes the same two steps. A handler that is
sure its decision will be dropped so, with nothing left in it that could add to the re-read,
may stop there (`draft.DecisionParked`: a broker failure and a controlled shutdown over the
columns do), since the rest would be computed only to be thrown away.
"""
from __future__ import annotations

from typing import Callable

import attrs

from . import brokers, deletion, outcomes, reassignment, rebalance, shutdown, topics
from . import commands as C
from . import events as E
from . import dynamic_config, failover, isr_change, log_dirs
from .draft import DecisionParked, Draft
from .intents import Timer
from .state import ControllerState, PartitionInfo

NOT_CONTROLLER = "NOT_CONTROLLER: this node is not the active controller"

_new = tuple.__new__  # builds a PartitionInfo (a NamedTuple) without a Python-level call


def step(state: ControllerState, event) -> tuple[ControllerState, tuple]:
    """Apply one event; return the new state and the commands to execute, in order."""
    kind = type(event)
    handler = _HANDLERS.get(kind)
    if handler is None:
        raise TypeError(f"not a controller event: {event!r}")
    if not state.active and kind not in _WHEN_INACTIVE:
        return state, ()
    if (state.pending or state.rechecking) and kind not in _NEVER_DEFERRED:
        return attrs.evolve(state, deferred=state.deferred + (event,)), ()
    state, commands = handler(state, event)
    if state.deferred and not state.pending and not state.rechecking and state.active:
        return _drain(state, commands)
    return state, commands


def _drain(state: ControllerState, commands: tuple) -> tuple[ControllerState, tuple]:
    """Decide the deferred events, oldest first, until one of them writes or re-reads again."""
    out = list(commands)
    while state.deferred and not state.pending and not state.rechecking and state.active:
        event = state.deferred[0]
        state = attrs.evolve(state, deferred=state.deferred[1:])
        state, more = _HANDLERS[type(event)](state, event)
        out.extend(more)
    return state, tuple(out)


def _drafted(fn: Callable[[Draft, object], None]):
    """A handler working on a Draft. `confirmed`: partitions whose states were just re-read for
    this very event (see the module docstring), whose refusals are final."""
    def handler(state: ControllerState, event, confirmed: frozenset = frozenset()) -> tuple[ControllerState, tuple]:
        d = Draft(state, cause=type(event).__name__, confirmed=confirmed)
        try:
            fn(d, event)
        except DecisionParked:
            pass  # (the rest of the decision could only be dropped: see DecisionParked)
        if d.unconfirmed and not confirmed:
            return _recheck(state, event, tuple(d.unconfirmed))
        return d.finish()
    return handler


def _recheck(state: ControllerState, event, tps: tuple) -> tuple[ControllerState, tuple]:
    """Drop the decision, park the event, and read the states it refused on."""
    read_id = state.next_write_id
    parked = attrs.evolve(state, rechecking=(event,), recheck_id=read_id, next_write_id=read_id + 1)
    return parked, (C.ReadPartitionStates(read_id=read_id, partitions=tps),)


def _rechecked(state: ControllerState, event: E.PartitionStatesRechecked) -> tuple[ControllerState, tuple]:
    """The re-read states are in: newer znode versions replace the cache (and every broker hears
    of the ISR, as after an ISR change notification), then the parked event is decided on them."""
    if not state.rechecking or event.read_id != state.recheck_id:
        return state, ()  # an answer for a term or a read that is over
    parked = state.rechecking[0]
    d = Draft(attrs.evolve(state, rechecking=(), recheck_id=0), cause=f"PartitionStatesRechecked({event.read_id})")
    changed = _refresh(d, event.states)
    if changed:
        d.requests.send_update_metadata_to_all(changed)
    state1, commands1 = d.finish()
    state2, commands2 = _HANDLERS[type(parked)](state1, parked, frozenset(tp for tp, _ in event.states))
    return state2, commands1 + commands2


def _refresh(d: Draft, states) -> list:
    """Put the read states that are newer than the cached ones; return their partitions."""
    changed = []
    d.read_many(tp for tp, _ in states)  # (built a chunk at a time: a re-read can hold thousands)
    for tp, li in states:
        info = d.info(tp)
        if info is None or li is None:
            continue
        cached = info.leader_isr
        if cached is None or (li.zk_version >= cached.zk_version and li != cached):
            d.put(tp, _new(PartitionInfo, (info.assignment, li, info.state, info.replica_states)))
            changed.append(tp)
    return changed


def _resigned(state: ControllerState, event) -> tuple[ControllerState, tuple]:
    # Kafka's onControllerResignation: forget the context; a later election rebuilds it. The
    # brokers and tools still waiting for an answer (deferred requests, replies parked with a
    # write that will now never be confirmed) are told to ask the next controller.
    return (ControllerState(config=state.config, seen_brokers=state.seen_brokers, next_write_id=state.next_write_id),
            _not_controller_replies(state))


def _not_controller_replies(state: ControllerState) -> tuple:
    replies = []
    for _, outbox in sorted(state.pending.items()):
        for request_id, broker_id in outbox.shutdown_replies:
            replies.append(C.ReplyControlledShutdown(request_id=request_id, broker_id=broker_id, error=NOT_CONTROLLER))
        for request_id, results in outbox.election_replies:
            replies.append(C.ReplyLeaderElection(request_id=request_id,
                                                 results=tuple((tp, NOT_CONTROLLER) for tp, _ in results)))
    for e in state.rechecking + state.deferred:
        if type(e) is E.ControlledShutdownRequested:
            replies.append(C.ReplyControlledShutdown(request_id=e.request_id, broker_id=e.broker_id, error=NOT_CONTROLLER))
        elif type(e) is E.LeaderElectionRequested:
            replies.append(C.ReplyLeaderElection(request_id=e.request_id,
                                                 results=tuple((tp, NOT_CONTROLLER) for tp in e.partitions or ())))
    return tuple(replies)


def _fenced(state: ControllerState, event: E.ControllerFenced) -> tuple[ControllerState, tuple]:
    if not state.active:
        return state, ()
    new_state, replies = _resigned(state, event)
    return new_state, (C.Resign(reason=event.reason),) + replies


_shutdown = _drafted(lambda d, e: shutdown.on_controlled_shutdown(d, e.request_id, e.broker_id, e.broker_epoch))


def _shutdown_request(state: ControllerState, event: E.ControlledShutdownRequested, confirmed: frozenset = frozenset()):
    if not state.active:
        return state, (C.ReplyControlledShutdown(request_id=event.request_id, broker_id=event.broker_id,
                                                 error=NOT_CONTROLLER),)
    return _shutdown(state, event, confirmed)


_elect = _drafted(lambda d, e: rebalance.on_leader_election_requested(d, e.request_id, e.election_type, e.partitions))


def _election_request(state: ControllerState, event: E.LeaderElectionRequested, confirmed: frozenset = frozenset()):
    if not state.active:
        tps = event.partitions or ()
        return state, (C.ReplyLeaderElection(request_id=event.request_id,
                                             results=tuple((tp, NOT_CONTROLLER) for tp in tps)),)
    return _elect(state, event, confirmed)


def _observed(d: Draft, event: E.PartitionStatesObserved) -> None:
    """Partition leaders changed ISRs: refresh the cache, tell every broker (ISR change
    notifications), and finish reassignments whose targets have all joined the ISR. (The plain
    ISR change is decided the same way without a draft by `isr_change.decide`.)"""
    changed = _refresh(d, event.states)
    if changed and event.source == "isr_change":
        d.requests.send_update_metadata_to_all(changed)
    for tp, _ in event.states:
        reassignment.maybe_complete(d, tp)


_observed_drafted = _drafted(_observed)


def _states_observed(state: ControllerState, event: E.PartitionStatesObserved,
                     confirmed: frozenset = frozenset()) -> tuple[ControllerState, tuple]:
    """The plain ISR change without a draft (isr_change.py), anything else as `_observed`."""
    decided = isr_change.decide(state, event)
    if decided is not None:
        return decided
    return _observed_drafted(state, event, confirmed)


IGNORED_PARTITION_ERRORS = ("STALE_CONTROLLER_EPOCH",)
"""Kafka's controller acts only on KAFKA_STORAGE_ERROR in LeaderAndIsr answers; a stale epoch is
what every broker answers for unchanged partitions after a failover, and is not a problem."""


def _responded(d: Draft, event: E.LeaderAndIsrResponded) -> None:
    errors = [(tp, e) for tp, e in event.errors if not e.startswith(IGNORED_PARTITION_ERRORS)]
    if errors:
        shown = ", ".join(f"{tp}: {e}" for tp, e in errors[:5])
        more = f" and {len(errors) - 5} more" if len(errors) > 5 else ""
        d.reject("LeaderAndIsr response", f"broker {event.broker_id} failed {len(errors)} partition(s): {shown}{more}")


def _topic_removed(state: ControllerState, event: E.TopicZnodesDeleted) -> tuple[ControllerState, tuple]:
    """The writer removed a deleted topic's znodes: listings from now on were read after it, and
    the topic in one of them is a topic created anew."""
    if event.topic not in state.removing_topics:
        return state, ()
    return attrs.evolve(state, removing_topics=state.removing_topics - {event.topic}), ()


def _timer(d: Draft, event: E.TimerFired) -> None:
    if event.name == Timer.REBALANCE:  # (a decoded event holds the plain string; equal)
        rebalance.on_rebalance_timer(d)


_HANDLERS: dict[type, Callable] = {
    E.ControllerElected: failover.on_elected,
    E.ControllerResigned: _resigned,
    E.ControllerFenced: _fenced,
    E.BrokersChanged: _drafted(lambda d, e: brokers.on_brokers_changed(d, e.brokers)),
    E.TopicsChanged: _drafted(lambda d, e: topics.on_topics_changed(d, e.topics, e.assignments, e.malformed)),
    E.TopicConfigsChanged: _drafted(lambda d, e: topics.on_configs_changed(d, e.configs)),
    E.TopicDeletionsRequested: _drafted(lambda d, e: deletion.on_deletions_requested(d, e.topics)),
    E.ReassignmentRequested: _drafted(lambda d, e: reassignment.on_reassignment_requested(d, e.exists, e.partitions, e.problem, e.zk_version)),
    E.PreferredElectionRequested: _drafted(lambda d, e: rebalance.on_preferred_requested(d, e.exists, e.partitions, e.problem, e.zk_version)),
    E.LeaderElectionRequested: _election_request,
    E.PartitionStatesObserved: _states_observed,
    E.PartitionStatesRechecked: _rechecked,
    E.ControlledShutdownRequested: _shutdown_request,
    E.LeaderAndIsrResponded: _drafted(log_dirs.storage_errors_then(_responded)),
    E.StopReplicaResponded: _drafted(lambda d, e: deletion.on_stop_replica_response(d, e.broker_id, e.delete, e.partitions, e.errors)),
    E.PartitionStatesWritten: outcomes.on_written,
    E.ZnodeWriteFailed: _drafted(lambda d, e: d.reject("zookeeper write", f"{e.what}: {e.reason}")),
    E.TopicZnodesDeleted: _topic_removed,
    E.TimerFired: _drafted(_timer),
    E.BrokerDefaultConfigChanged: dynamic_config.on_broker_default_changed,
    E.LogDirEventNotified: _drafted(lambda d, e: log_dirs.on_log_dir_event(d, e.brokers)),
}

_WHEN_INACTIVE = {E.ControllerElected, E.ControllerResigned, E.ControllerFenced,
                  E.ControlledShutdownRequested, E.LeaderElectionRequested,
                  E.BrokerDefaultConfigChanged}  # the node's config, kept across terms

_NEVER_DEFERRED = {E.PartitionStatesWritten, E.PartitionStatesRechecked, E.ControllerElected, E.ControllerResigned,
                   E.ControllerFenced}
"""The outcomes that end a wait, and the events that end the term (see the module docstring)."""

assert set(_HANDLERS) == set(E.EVENT_TYPES), "every event type needs a handler"
