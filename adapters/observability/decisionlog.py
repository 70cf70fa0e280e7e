"""The decision log: one line per controller decision, saying what was decided and why.

A loop observer (`loop.observers`) that reads the event, the state before and after `step()`,
and the commands, and logs on `kctl.controller`:

    [Controller id=5 epoch=3] BrokersChanged (seq 412): broker 1 failed (registration gone);
      812 partitions went offline; 812 leaders elected (offline election, 0 unclean);
      812 replicas OnlineReplica -> OfflineReplica; 812 partition-state writes as write 17
    [Controller id=5 epoch=3] PartitionStatesWritten (seq 413): write 17 landed (812 partitions,
      0 version conflicts); LeaderAndIsr to brokers 2,3,4 (1624 partition states in all);
      UpdateMetadata to 4 brokers

(one line each). The "why" comes from the event and from cheap differences between the two
states (brokers gone, joined or restarted; topics created or deleted), the "what" from the
commands. Events that change nothing and command nothing (an acknowledged request, an event on a
node that is not the controller, an event deferred behind a pending write) are logged at DEBUG.

Cost on the loop: O(commands) plus O(brokers) or O(topics) when those changed; never a pass
over the partitions. Every partition is listed in the state-change log instead
(adapters/observability/statelog.py).
"""
from __future__ import annotations

import logging
from typing import Callable

from controller_core import commands as C
from controller_core import events as E
from controller_core.machines import PartitionState

from adapters.observability import logformat

log = logging.getLogger("kctl.controller")

_ONLINE = str(PartitionState.ONLINE)
_OFFLINE = str(PartitionState.OFFLINE)
_NEW = str(PartitionState.NEW)
_NON_EXISTENT = str(PartitionState.NON_EXISTENT)

_ELECTION = {
    "BrokersChanged": "offline", "TopicsChanged": "offline", "ControllerElected": "offline",
    "TopicConfigsChanged": "offline", "ControlledShutdownRequested": "controlled-shutdown",
    "PreferredElectionRequested": "preferred", "TimerFired": "preferred (auto rebalance)",
    "LeaderElectionRequested": "requested", "ReassignmentRequested": "reassignment",
    "PartitionStatesObserved": "reassignment", "BrokerDefaultConfigChanged": "offline",
    "LeaderAndIsrResponded": "offline (failed log dir)",
}
"""The election rule a decision's cause implies, for the log line (the core does not say)."""


class Decision(logformat.Structured):
    def __init__(self, controller_id: int, epoch: int, event: str, seq: int | None, parts: list[str], fields: dict):
        self.controller_id = controller_id
        self.epoch = epoch
        self.event = event
        self.seq = seq
        self.parts = tuple(parts)
        self.extra = dict(fields)

    def __str__(self) -> str:
        seq = f" (seq {self.seq})" if self.seq is not None else ""
        return f"[Controller id={self.controller_id} epoch={self.epoch}] {self.event}{seq}: {'; '.join(self.parts)}"

    def fields(self) -> dict:
        return {"controller_id": self.controller_id, "controller_epoch": self.epoch, "event": self.event,
                "event_seq": self.seq, **self.extra}


class DecisionLog:
    """Loop observer. `fenced()` says whether the executor refuses to act (a fenced term)."""

    def __init__(self, controller_id: int, fenced: Callable[[], bool] = lambda: False):
        self.controller_id = controller_id
        self.fenced = fenced
        self.writes: dict[int, int] = {}  # write id -> partitions, until its outcome is logged

    def __call__(self, event, timing: dict) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        level, parts, fields = describe(event, timing["before"], timing["state"], timing["commands"], self.writes)
        if level == logging.DEBUG and not log.isEnabledFor(logging.DEBUG):
            return
        if level > logging.DEBUG and self.fenced() and not any(type(c) is C.Resign for c in timing["commands"]):
            parts.append("not executed: this controller has been fenced")
        epoch = timing["state"].epoch or timing["before"].epoch
        log.log(level, Decision(self.controller_id, epoch, type(event).__name__, timing.get("seq"), parts, fields))


def describe(event, before, after, commands, writes: dict | None = None) -> tuple[int, list[str], dict]:
    """(level, the line's clauses, its structured fields) for one step. `writes` (write id ->
    partitions) is kept across calls so that an outcome can say how much its write held."""
    fields: dict = {}
    writes = {} if writes is None else writes
    if not after.active:
        writes.clear()
    for c in commands:
        if type(c) is C.WritePartitionStates:
            writes[c.write_id] = len(c.writes)
    if not before.active and not after.active:
        return logging.DEBUG, ["ignored: not the controller"] + _decisions(commands, fields), fields
    deferred = getattr(after, "deferred", ())
    if deferred and deferred[-1] is event and len(deferred) > len(getattr(before, "deferred", ())):
        if getattr(before, "rechecking", ()):
            return logging.DEBUG, [f"deferred until the states of read {before.recheck_id} are in"], {"deferred": True}
        waiting = ", ".join(str(w) for w in sorted(before.pending.keys()))
        return logging.DEBUG, [f"deferred until write {waiting} is confirmed"], {"deferred": True}
    parts = []
    why = _why(event, before, after, fields, writes)
    if why:
        parts.append(why)
    # a controller that stops being one forgets the cluster: that is not brokers failing or
    # topics being deleted, so only a change seen while in office is described
    changes = _changes(before, after, fields) if before.active and after.active else []
    parts += changes
    drained = len(getattr(before, "deferred", ())) - len(deferred)
    if drained > 0:
        names = ", ".join(type(e).__name__ for e in before.deferred[:drained])
        parts.append(f"then decided the deferred {names}")
    decided = _decisions(commands, fields)
    parts += decided
    if not decided and not changes and type(event) not in _ALWAYS_INFO:
        return logging.DEBUG, parts or ["nothing to do"], fields
    return logging.INFO, parts or ["nothing to do"], fields


_ALWAYS_INFO = {E.ControllerElected, E.ControllerResigned, E.ControllerFenced, E.ZnodeWriteFailed}


def _ids(ids) -> str:
    return ",".join(str(i) for i in ids)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _why(event, before, after, fields: dict, writes: dict) -> str | None:
    kind = type(event)
    if kind is E.ControllerElected:
        return (f"elected controller (epoch {event.epoch}): {_plural(len(after.brokers), 'broker')}, "
                f"{_plural(len(after.topics), 'topic')}, {_plural(len(after.partitions), 'partition')}")
    if kind is E.ControllerResigned:
        return f"resigned: {event.reason}"
    if kind is E.ControllerFenced:
        return f"fenced: {event.reason}"
    if kind is E.PartitionStatesWritten and not event.final:
        fields["write_id"] = event.write_id
        return f"write {event.write_id} in progress: {_plural(len(event.landed), 'partition')} landed so far"
    if kind is E.PartitionStatesWritten:
        fields["write_id"] = event.write_id
        size = writes.pop(event.write_id, None)
        held = f"{_plural(size, 'partition')}, " if size is not None else ""
        return f"write {event.write_id} landed ({held}{_plural(len(event.conflicts), 'version conflict')})"
    if kind is E.ZnodeWriteFailed:
        return f"write failed: {event.what}: {event.reason}"
    if kind is E.ControlledShutdownRequested:
        return f"broker {event.broker_id} asked for a controlled shutdown"
    if kind is E.LeaderElectionRequested:
        scope = "all partitions" if event.partitions is None else _plural(len(event.partitions), "partition")
        return f"{event.election_type} election requested for {scope}"
    if kind is E.PreferredElectionRequested and event.exists:
        return f"preferred election requested for {_plural(len(event.partitions), 'partition')}"
    if kind is E.ReassignmentRequested and event.exists:
        return f"reassignment requested for {_plural(len(event.partitions), 'partition')}"
    if kind is E.PartitionStatesObserved:
        return f"{_plural(len(event.states), 'partition state')} read after {event.source.replace('_', ' ')}"
    if kind is E.PartitionStatesRechecked and before.rechecking and event.read_id == before.recheck_id:
        return (f"{_plural(len(event.states), 'partition state')} re-read (read {event.read_id}); "
                f"deciding the waiting {type(before.rechecking[0]).__name__} on them")
    if kind is E.LeaderAndIsrResponded and event.errors:
        return f"broker {event.broker_id} answered LeaderAndIsr with {_plural(len(event.errors), 'error')}"
    if kind is E.StopReplicaResponded:
        return (f"broker {event.broker_id} answered StopReplica for {_plural(len(event.partitions), 'partition')} "
                f"({_plural(len(event.errors), 'error')})")
    if kind is E.TimerFired:
        return f"timer {event.name} fired"
    return None


def _changes(before, after, fields: dict) -> list[str]:
    """What changed in the cluster as the controller sees it: brokers and topics."""
    parts = []
    if before.brokers is not after.brokers:
        b, a = dict(before.brokers.items()), dict(after.brokers.items())
        gone = set(b) - set(a)
        failed = sorted(gone - before.shutting_down)
        stopped = sorted(gone & before.shutting_down)
        joined = sorted(set(a) - set(b))
        restarted = sorted(x for x in a if x in b and a[x].epoch != b[x].epoch)
        if failed:
            fields["brokers_failed"] = failed
            parts.append(f"{'broker' if len(failed) == 1 else 'brokers'} {_ids(failed)} failed (registration gone)")
        if stopped:
            fields["brokers_shut_down"] = stopped
            parts.append(f"{'broker' if len(stopped) == 1 else 'brokers'} {_ids(stopped)} shut down "
                         f"(registration gone after a controlled shutdown)")
        if joined:
            fields["brokers_joined"] = joined
            parts.append(f"{'broker' if len(joined) == 1 else 'brokers'} {_ids(joined)} joined")
        if restarted:
            fields["brokers_restarted"] = restarted
            parts.append(f"{'broker' if len(restarted) == 1 else 'brokers'} {_ids(restarted)} restarted "
                         f"(new registration epoch)")
    if before.shutting_down is not after.shutting_down:
        started = sorted(after.shutting_down - before.shutting_down)
        if started:
            fields["brokers_shutting_down"] = started
            parts.append(f"{'broker' if len(started) == 1 else 'brokers'} {_ids(started)} shutting down")
    if before.topics is not after.topics:
        b, a = dict(before.topics.items()), dict(after.topics.items())
        created = sorted(set(a) - set(b))
        removed = sorted(set(b) - set(a))
        grown = sorted(t for t in a if t in b and a[t].partition_count > b[t].partition_count)
        if created:
            fields["topics_created"] = created
            parts.append(f"{'topic' if len(created) == 1 else 'topics'} {', '.join(created)} created")
        if grown:
            parts.append(", ".join(f"{t} grew to {a[t].partition_count} partitions" for t in grown))
        if removed:
            fields["topics_deleted"] = removed
            parts.append(f"{'topic' if len(removed) == 1 else 'topics'} {', '.join(removed)} deleted")
    if before.topics_to_delete is not after.topics_to_delete:
        queued = sorted(after.topics_to_delete - before.topics_to_delete)
        if queued:
            parts.append(f"deletion of {', '.join(queued)} queued")
    return parts


def _decisions(commands, fields: dict) -> list[str]:
    """The commands, summarised: transitions, elections, writes, requests, replies."""
    parts: list[str] = []
    went_offline = elected = unclean = initialised = created = deleted = 0
    replica_moves: dict[tuple[str, str], int] = {}
    failures: dict[tuple[str, str, str], int] = {}
    election_kind = None
    lai: list[int] = []
    lai_partitions = 0
    um: list[int] = []
    stop: list[str] = []
    writes = []
    other = []
    rejected = []
    for c in commands:
        kind = type(c)
        if kind is C.LogStateChanges:
            cause = c.cause.split("(", 1)[0]
            for e in c.entries:
                n = len(e.partitions)
                if not e.ok:
                    key = ("partition" if e.replica < 0 else "replica", f"{e.from_state} -> {e.to_state}", e.detail)
                    failures[key] = failures.get(key, 0) + n
                elif e.replica >= 0:
                    key = (e.from_state, e.to_state)
                    replica_moves[key] = replica_moves.get(key, 0) + n
                elif e.to_state == _ONLINE and e.from_state in (_OFFLINE, _ONLINE):
                    elected += n
                    election_kind = election_kind or _ELECTION.get(cause, cause)
                    if "unclean" in e.detail:
                        unclean += n
                elif e.to_state == _ONLINE and e.from_state == _NEW:
                    initialised += n
                elif e.to_state == _OFFLINE:
                    went_offline += n
                elif e.to_state == _NEW:
                    created += n
                elif e.to_state == _NON_EXISTENT:
                    deleted += n
        elif kind is C.WritePartitionStates:
            writes.append((c.write_id, len(c.writes)))
        elif kind is C.SendLeaderAndIsr:
            lai.append(c.broker_id)
            lai_partitions += len(c.partitions)
        elif kind is C.SendUpdateMetadata:
            um.append(c.broker_id)
        elif kind is C.SendStopReplica:
            stop.append(f"{c.broker_id}{' (delete)' if c.delete else ''}")
        elif kind is C.WriteTopicAssignment:
            other.append(f"rewrote the assignment of topic {c.topic}")
        elif kind is C.DeleteTopic:
            other.append(f"removed the znodes of topic {c.topic}")
        elif kind is C.DeleteTopicDeletionRequests:
            other.append(f"dropped deletion requests for unknown topics {', '.join(c.topics)}")
        elif kind is C.WriteReassignmentPlan:
            other.append("reassignment plan done, znode removed" if not c.partitions else
                         f"reassignment plan now {_plural(len(c.partitions), 'partition')}")
        elif kind is C.DeletePreferredElectionRequest:
            other.append("preferred-election request removed")
        elif kind is C.RejectRequest:
            rejected.append(f"{c.kind}: {c.reason}")
        elif kind is C.ReplyControlledShutdown:
            other.append(f"answered broker {c.broker_id}'s controlled shutdown: " +
                         (c.error if c.error else f"{_plural(len(c.partitions_remaining), 'partition')} still led there"))
        elif kind is C.ReplyLeaderElection:
            failed = sum(1 for _, err in c.results if err)
            other.append(f"answered a leader election for {_plural(len(c.results), 'partition')} ({failed} failed)")
        elif kind is C.Resign:
            other.append(f"resigning: {c.reason}")
        elif kind is C.ReadPartitionStates:
            shown = ", ".join(map(str, c.partitions[:5])) + (" ..." if len(c.partitions) > 5 else "")
            fields["recheck_partitions"] = len(c.partitions)
            other.append(f"not deciding yet: an election of {shown} would be refused on the cached ISR, "
                         f"so their states are re-read from ZooKeeper first (read {c.read_id})")
    if created:
        parts.append(f"{_plural(created, 'partition')} created")
    if went_offline:
        fields["partitions_offline"] = went_offline
        parts.append(f"{_plural(went_offline, 'partition')} went offline")
    if initialised:
        parts.append(f"{_plural(initialised, 'new partition')} got a first leader")
    if elected:
        fields["leaders_elected"] = elected
        fields["unclean_elections"] = unclean
        parts.append(f"{_plural(elected, 'leader')} elected ({election_kind} election, {unclean} unclean)")
    for (f, t), n in replica_moves.items():
        parts.append(f"{_plural(n, 'replica')} {f} -> {t}")
    if deleted:
        parts.append(f"{_plural(deleted, 'partition')} deleted")
    for (what, transition, detail), n in failures.items():
        parts.append(f"{n} {what} transition(s) {transition} refused: {detail}")
    if failures:
        fields["refused_transitions"] = sum(failures.values())
    for write_id, count in writes:
        fields["write_id"] = write_id
        fields["partition_writes"] = count
        parts.append(f"{_plural(count, 'partition-state write')} as write {write_id}")
    if lai:
        lai.sort()
        fields["leader_and_isr_to"] = lai
        parts.append(f"LeaderAndIsr to {'broker' if len(lai) == 1 else 'brokers'} {_ids(lai)} "
                     f"({_plural(lai_partitions, 'partition state')} in all)")
    if um:
        um.sort()
        fields["update_metadata_to"] = um
        parts.append(f"UpdateMetadata to {_plural(len(um), 'broker')}")
    if stop:
        parts.append(f"StopReplica to {'broker' if len(stop) == 1 else 'brokers'} {', '.join(stop)}")
    parts += other
    if rejected:
        fields["rejected"] = rejected
        parts.append("rejected " + "; ".join(rejected))
    return parts
