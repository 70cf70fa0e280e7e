"""Re-executing one fold unit through `controller_core.step()` and extracting its history.

Plain Python (no pyspark): the Spark job calls `fold_unit` on the executors, one unit (one
snapshot-headed segment, see `replay.plan`) per task; `replay.local` calls it in a loop.

For every event the fold recomputes the commands, digests them exactly as the live loop did
(`codec.digest`, through the faster equivalent in `replay.digest`) and compares with the event's
"effects" record: a difference is a *divergence* finding with the journal, seq and event type.
It also turns each step into history rows (plain dicts, one list per output table):

- timeline: one row per partition-state value ZooKeeper accepted or the controller observed:
  controller writes confirmed by `PartitionStatesWritten` (kind "write"), values read back after
  a version conflict ("conflict"), leaders' ISR changes seen through `PartitionStatesObserved`
  or re-read before an election through `PartitionStatesRechecked` ("observed"), the states a new controller read at election ("elected"), and topic deletions
  ("deleted"). A write's leader/ISR/epoch come from the `WritePartitionStates` command, its
  assignment from the state after the deciding step, its time from the confirming event;
- elections: every leader choice of a write (clean, unclean, preferred, controlled shutdown,
  reassign, initial), with the write's outcome (landed, conflict, unconfirmed);
- events: one row per event: type, commands, whether the digest matched, the time `step()` plus
  the digest took here (the live loop does not journal its queue or processing times yet, so
  `at` deltas between events are the only live timing the journal holds);
- raw term, broker and reassignment changes, stitched over the whole cluster by `replay.audit`.

A write decided in one unit may be confirmed in the next: the decision and the outcome are then
handed out as *leftovers* and joined by `stitch_writes` after all units are folded.

Live-loop facts the fold relies on (adapters/controller/loop.py, adapters/node.py): events are journaled
with the loop's epoch at append time (0 while it is not the controller); a process restart
starts from `initial_state(config)` and continues the journal, so an event journaled with epoch
0 while the replayed state has an epoch means the process restarted (the fold does the same);
every new term rolls the journal, so its segment's snapshot is the state before ControllerElected.
"""
from __future__ import annotations

import hashlib
import time as _time
from typing import Iterable

from controller_core import codec
from controller_core import commands as C
from controller_core import events as E
from controller_core.intents import Strategy, WriteIntent
from controller_core.state import initial_state
from controller_core.values import LeaderIsr
from controller_core.step import step

from . import digest as fast_digest
from adapters.journal.canonical import canonical as _orjson_canonical
from .collector import gc_paused
from adapters.journal.format import InvalidRecord
from .records import verify_line
from .plan import INF, finding

_canonical = _orjson_canonical or codec.canonical_json
ELECTION_KINDS = {Strategy.OFFLINE: "clean", Strategy.OFFLINE_UNCLEAN: "clean", Strategy.REASSIGN: "reassign",
                  Strategy.PREFERRED: "preferred", Strategy.CONTROLLED_SHUTDOWN: "controlled_shutdown"}
_TERM_END = (E.ControllerResigned, E.ControllerFenced)
_VANISHED = LeaderIsr(-1, -1, (), -1, -1)
"""The `deleted` row's values of a partition that had no state znode left (see `_history`)."""


def state_hashes(encoded: dict) -> tuple[str, dict[str, str]]:
    """A hash of an encoded ControllerState and one per top-level field (to name differences).
    The text is `codec.canonical_json`'s, written by orjson where that gives the same text
    (adapters/journal/canonical.py, as the digest)."""
    fields = {k: hashlib.blake2b(_canonical(v).encode(), digest_size=12).hexdigest()
              for k, v in encoded.items()}
    whole = hashlib.blake2b(codec.canonical_json(fields).encode(), digest_size=16).hexdigest()
    return whole, fields


def _assignments(partitions, tps: list) -> list:
    """`[partitions.get(tp).assignment ...]` (None for a partition it does not hold); the core's
    partition image reads many from its replica columns without building the partitions (a
    re-read of hundreds: about a third of the cost)."""
    assignments_of = getattr(partitions, "assignments_of", None)
    if assignments_of is not None:
        return assignments_of(tps) if len(tps) > 8 else list(map(partitions.assignment_of, tps))
    return [None if info is None else info.assignment for info in map(partitions.get, tps)]


def _leaders(partitions, tps: list) -> list:
    """The leader each of `tps` has (None: absent or without a leader-and-ISR); the core's
    partition image reads many from its leader column without building the partitions."""
    leaders_of = getattr(partitions, "leaders_of", None)
    if leaders_of is not None and len(tps) > 8:
        return leaders_of(tps)
    out = []
    for info in map(partitions.get, tps):
        li = None if info is None else info.leader_isr
        out.append(None if li is None else li.leader)
    return out


def _li_list(li) -> list | None:
    return None if li is None else [li.leader, li.leader_epoch, list(li.isr), li.controller_epoch, li.zk_version]


class UnitFold:
    """Folds one unit. Feed it `run(head_text, records)`; read the lists afterwards."""

    def __init__(self, unit: dict, journal_name: str):
        self.unit = unit
        self.journal = journal_name
        self.timeline: list[dict] = []
        self.elections: list[dict] = []
        self.events: list[dict] = []
        self.findings: list[dict] = []
        self.terms: list[dict] = []
        self.brokers: list[dict] = []
        self.reassignments: list[dict] = []
        self.decisions: dict[int, dict] = {}  # write_id -> decision waiting for its outcome
        self.orphans: list[dict] = []  # outcomes whose decision is not in this unit
        self.unconfirmed: list[dict] = []  # decisions that can no longer be confirmed
        self.state = None
        self.controller_id = None
        self.summary: dict = {}
        self._where: tuple = (None, None)  # file and line of the event being folded
        self._last_where: tuple = (None, None)  # of the last record folded

    # -- driving -------------------------------------------------------------------------------

    def run(self, head, records: Iterable[tuple]) -> "UnitFold":
        """`head`: the unit's snapshot record (its line, or the verified record dict);
        `records`: (seq, type, file, line, line text or verified record, event_seq) sorted by seq,
        head excluded."""
        # The cyclic collector is paused for the whole unit (one segment): the rows, states and
        # commands it allocates hold no reference cycles, but the collections their numbers
        # trigger walk every row kept so far; measured on a 3,000-event journal over 10,000
        # partitions, a third of the plain replay's CPU, and a few thousand cyclic objects to
        # free in all, which the collector frees once it runs again.
        with gc_paused():
            return self._run(head, records)

    def _run(self, head, records: Iterable[tuple]) -> "UnitFold":
        u = self.unit
        started = _time.perf_counter()
        s = {"unit": u["unit"], "journal": self.journal, "head_path": u["head_path"], "index": u["index"],
             "snapshot_seq": u["snapshot_seq"], "last": u["hi"] >= INF, "events": 0, "step_seconds": 0.0,
             "snapshot_hash": None, "snapshot_fields": None, "snapshot_initial": False, "final_hash": None,
             "final_fields": None, "first_at": None, "last_at": None, "last_seq": None, "broken": None,
             "first_row_at": None}
        self.summary = s
        try:
            head = verify_line(head) if isinstance(head, str) else head
            encoded = head["body"]["state"]
            self.state = codec.decode_state(encoded)
        except (InvalidRecord, KeyError, TypeError, codec.CodecError) as exc:
            self._find("undecodable-record", "violation", f"the head snapshot cannot be decoded: {exc}",
                       file=u["head_path"], line=1, seq=u["snapshot_seq"])
            s["broken"] = "head snapshot"
            return self
        self.controller_id = head["controller_id"]
        if encoded.get("v") != codec.VERSIONS["ControllerState"]:
            # a head of an older schema is compared in today's, as the fold's states are encoded
            encoded = codec.encode_state(self.state)
        s["snapshot_hash"], s["snapshot_fields"] = state_hashes(encoded)
        s["snapshot_initial"] = self.state == initial_state(self.state.config)
        s["first_at"] = s["last_at"] = head["at"]
        records = list(records)
        confirmed = {r[5] for r in records if r[1] == "effects" and r[5] is not None}
        hi = u["hi"]
        self._pending: dict[int, tuple] = {}
        self._last_at = None
        for seq, kind, file, line, text, _ in records:
            if isinstance(text, dict):
                rec = text
            else:
                try:
                    rec = verify_line(text)
                except InvalidRecord as exc:  # the SQL check passed but the strict parse did not
                    self._find("corrupt-record", "violation", exc.reason, file=file, line=line, seq=seq)
                    continue
            if kind == "event":
                if seq > hi and seq > u["snapshot_seq"]:
                    if seq in confirmed:
                        continue  # in this unit's tail but stepped after the next snapshot: the next unit's
                    # (not confirmed anywhere: stepped by a process killed before its effects
                    # record, or never; re-executed here, unchecked: plan.py)
                elif seq < u["snapshot_seq"] and seq not in confirmed:
                    continue  # journaled before the snapshot and never confirmed: the previous unit's tail (plan.py)
                if s["broken"] is None:
                    self._event(rec, file, line)
            elif kind == "effects":
                self._effects(rec, file, line)  # (of an event in the tail that the next unit re-executes: a no-op)
            elif kind != "snapshot":
                self._find("unknown-record", "warning", f"record type {kind!r} is not replayed", file=file,
                           line=line, seq=seq)
            s["last_at"] = max(s["last_at"], rec["at"])
            s["last_seq"] = seq
            self._last_where = (file, line)
        self._finish()
        s["fold_seconds"] = _time.perf_counter() - started
        return self

    def _find(self, rule, severity, detail, **where) -> None:
        self.findings.append(finding(rule, severity, detail, journal=self.journal, **where))

    # -- one event -----------------------------------------------------------------------------

    def _event(self, rec: dict, file, line) -> None:
        seq, at = rec["seq"], rec["at"]
        body = rec["body"]
        etype = body.get("type", "?")
        try:
            event = codec.decode_event(body)
        except codec.CodecError as exc:
            self._find("undecodable-record", "violation", f"{etype} cannot be decoded: {exc}; re-execution of this "
                       "unit stops here", file=file, line=line, seq=seq, time=at)
            self.summary["broken"] = f"seq {seq}"
            return
        state = self.state
        if rec["controller_epoch"] == 0 and state.epoch != 0 and type(event) is not E.ControllerElected:
            self._restart(state, seq, at, file, line)
            state = self.state
        t0 = _time.perf_counter()
        try:
            new, commands = step(state, event)
            dg = fast_digest.digest(commands)
        except Exception as exc:  # an invariant of the core broke: a finding, not a crash of the job
            self._find("re-execution", "violation", f"step() raised on {etype}: {type(exc).__name__}: {exc}; "
                       "re-execution of this unit stops here", file=file, line=line, seq=seq, time=at)
            self.summary["broken"] = f"seq {seq}"
            return
        dt = _time.perf_counter() - t0
        self.summary["events"] += 1
        self.summary["step_seconds"] += dt
        row = {"journal": self.journal, "controller_id": rec["controller_id"], "seq": seq, "time": at, "type": etype,
               "controller_epoch": rec["controller_epoch"], "commands": len(commands), "digest_ok": None,
               "replay_us": round(dt * 1e6, 1), "at_delta_ms": None if self._last_at is None else at - self._last_at,
               "queue_ms": None, "live_step_us": None, "live_process_us": None, "file": file, "line": line}
        self._last_at = at
        self._pending[seq] = (len(commands), dg, new.epoch, etype, row, commands)
        self._where = (file, line)
        try:
            self._history(state, new, event, commands, seq, at, etype)
        finally:
            self.state = new

    def _effects(self, rec: dict, file, line) -> None:
        body = rec["body"]
        es = body.get("event_seq")
        got = self._pending.pop(es, None)
        if got is None:
            return  # its event was not re-executed here (before the snapshot, or re-execution stopped)
        count, dg, epoch, etype, row, commands = got
        ok = count == body.get("count") and dg == body.get("digest")
        if not ok and count == body.get("count"):
            ok = codec.reference_digest(commands) == body.get("digest")  # the definition, before calling it a divergence
        if ok and rec["controller_epoch"] != epoch:
            ok = False
        row["digest_ok"] = ok
        # the live loop's times (effects records since 2026-12-06; none in older journals)
        queue_us, step_us, process_us = body.get("queue_us"), body.get("step_us"), body.get("process_us")
        if queue_us.__class__ is int:
            row["queue_ms"] = queue_us / 1000
        if step_us.__class__ is int:
            row["live_step_us"] = float(step_us)
        if process_us.__class__ is int:
            row["live_process_us"] = float(process_us)
        self.events.append(row)
        if not ok:
            self._find("re-execution", "violation",
                       f"{etype} at seq {es} re-executes to {count} command(s) (digest {dg[:12]}, epoch {epoch}); "
                       f"the live controller recorded {body.get('count')} (digest {str(body.get('digest'))[:12]}, "
                       f"epoch {rec['controller_epoch']})", file=row["file"], line=row["line"], seq=es, time=row["time"])

    def _restart(self, state, seq, at, file, line) -> None:
        self._find("process-restart", "info", f"the controller process restarted before seq {seq} (an event journaled "
                   f"outside any term while the replayed state held epoch {state.epoch}); replay continues from a "
                   "fresh state", file=file, line=line, seq=seq, time=at)
        if state.active:
            self.terms.append({"journal": self.journal, "controller_id": self.controller_id, "kind": "end",
                               "epoch": state.epoch, "time": self._last_at or at, "seq": seq,
                               "reason": "process restart"})
        self.unconfirmed.extend(self.decisions.values())
        self.decisions.clear()
        self.state = initial_state(state.config)

    def _finish(self) -> None:
        leftover = sorted(self._pending.items())
        for seq, (count, dg, epoch, etype, row, _) in leftover:
            self.events.append(row)
        if leftover:
            where = "at the end of the journal" if self.summary["last"] else "before the next snapshot"
            self._find("no-effects", "info", f"{len(leftover)} event(s) {where} have no effects record (the controller "
                       "stopped before recording its decisions); they were re-executed but cannot be checked",
                       file=leftover[0][1][4]["file"], line=leftover[0][1][4]["line"], seq=leftover[0][0])
        self._pending.clear()
        if self.summary["broken"] is None and self.state is not None:
            try:
                self.summary["final_hash"], self.summary["final_fields"] = state_hashes(codec.encode_state(self.state))
            except codec.CodecError as exc:
                self._find("unencodable-state", "violation", f"the replayed state cannot be encoded as a snapshot: "
                           f"{exc}", file=self._last_where[0], line=self._last_where[1], seq=self.summary["last_seq"])
        self.summary["decisions_left"] = len(self.decisions) + len(self.unconfirmed)
        # where the unit's timeline rows start (replay/carry.py: the cut, and whether the last one holds)
        self.summary["first_row_at"] = min((r["time"] for r in self.timeline if r["time"] is not None), default=None)
        self.summary["orphans"] = len(self.orphans)

    # -- history ---------------------------------------------------------------------------------

    def _history(self, old, new, event, commands, seq, at, etype) -> None:
        cls = type(event)
        epoch = new.epoch if new.active else old.epoch
        if cls is E.PartitionStatesWritten and not event.final:
            pass  # a large write's progress: its requests went out; the final outcome confirms
        elif cls is E.PartitionStatesWritten:
            outcome = {"journal": self.journal, "write_id": event.write_id, "seq": seq, "time": at,
                       "file": self._where[0], "line": self._where[1],
                       "versions": [[tp.topic, tp.partition, v] for tp, v in event.versions],
                       "conflicts": [[tp.topic, tp.partition, _li_list(li)] for tp, li in event.conflicts]}
            decision = self.decisions.pop(event.write_id, None)
            if decision is None:
                self.orphans.append(outcome)
            else:
                t, e = confirm(decision, outcome)
                self.timeline.extend(t)
                self.elections.extend(e)
        elif cls is E.PartitionStatesObserved or cls is E.PartitionStatesRechecked:
            # what the znode held when read: a fact whether or not the controller took it (the
            # state after the step may already hold the optimistic value of a write it decided)
            source = event.source if cls is E.PartitionStatesObserved else "recheck"
            states = event.states
            tps = [tp for tp, _ in states]
            # the assignment it was read under: the old state's, else the new one's (a re-read
            # of thousands of partitions is looked up a column chunk at a time)
            olds = _assignments(old.partitions, tps)
            news = _assignments(new.partitions, tps) if None in olds else olds
            for (tp, li), ra, ra2 in zip(states, olds, news):
                if ra is None:
                    ra = ra2
                if ra is None or li is None:
                    continue
                self.timeline.append(self._row(tp, li, ra, at, epoch, "observed", source, etype, seq, seq))
        elif cls is E.ControllerElected:
            self.terms.append({"journal": self.journal, "controller_id": self.controller_id, "kind": "start",
                               "epoch": event.epoch, "time": at, "seq": seq, "reason": None,
                               "file": self._where[0], "line": self._where[1]})
            for b in event.snapshot.brokers:
                self.brokers.append(self._broker(b.broker_id, b.epoch, "present", at, event.epoch, seq))
            self.timeline.extend(self._elected_rows(event, at, seq, etype))
        elif cls in _TERM_END and old.active:
            self.terms.append({"journal": self.journal, "controller_id": self.controller_id, "kind": "end",
                               "epoch": old.epoch, "time": at, "seq": seq,
                               "reason": f"{etype}: {event.reason}"})
        if new.brokers is not old.brokers and old.active and new.active and cls is not E.ControllerElected:
            # a BrokersChanged, or one that waited behind a write or a re-read and is decided in
            # the step of the event that ended the wait
            for b, info in sorted(new.brokers.items()):
                prev = old.brokers.get(b)
                if prev is None:
                    self.brokers.append(self._broker(b, info.epoch, "up", at, epoch, seq))
                elif prev.epoch != info.epoch:
                    self.brokers.append(self._broker(b, info.epoch, "bounce", at, epoch, seq))
            shutting_down = getattr(old, "shutting_down", frozenset())
            for b, info in sorted(old.brokers.items()):
                if b not in new.brokers:
                    row = self._broker(b, info.epoch, "down", at, epoch, seq)
                    row["controlled"] = b in shutting_down  # it asked for a controlled shutdown first
                    self.brokers.append(row)
        deleted = ()
        for c in commands:
            kind = type(c)
            if kind is C.WritePartitionStates:
                self.decisions[c.write_id] = self._decide(c, old, new, commands, seq, at, etype)
            elif kind is C.DeleteTopic:
                self._deleted_rows(old, c.topic, at, epoch, etype, seq)
                deleted += (c.topic,)
        if new.topics is not old.topics and old.active and new.active and old.epoch == new.epoch:
            # a topic znode that vanished without the controller deleting it (topics._forget: an
            # operator removed it by hand, or a listing arrived after another controller deleted
            # it): its partitions end here too, else the walk kept them to the end of the history
            for topic in [t for t in old.topics.keys() if t not in new.topics and t not in deleted]:
                self._deleted_rows(old, topic, at, epoch, etype, seq)
        if new.reassigning is not old.reassigning and cls not in _TERM_END and new.active:
            self._reassignments(old, new, at, seq, etype)

    def _deleted_rows(self, old, topic: str, at, epoch, etype, seq) -> None:
        """A `deleted` row for each partition of `topic` (as `old` knew it): the end of its life."""
        for tp in old.partitions_of(topic):
            info = old.partitions.get(tp)
            if info is not None:
                # (a partition whose state znode vanished before its topic went has no state
                # left, but its life ends here all the same)
                li = info.leader_isr if info.leader_isr is not None else _VANISHED
                row = self._row(tp, li, info.assignment, at, epoch, "deleted", None, etype, seq, seq)
                row.update(leader=-1, isr=[], replicas=[], adding=[], removing=[])
                self.timeline.append(row)

    def _row(self, tp, li, ra, at, epoch, kind, change, cause_type, cause_seq, seq) -> dict:
        return {"time": at, "journal": self.journal, "controller_id": self.controller_id, "epoch": epoch,
                "topic": tp.topic, "partition": tp.partition, "leader": li.leader, "leader_epoch": li.leader_epoch,
                "isr": list(li.isr), "controller_epoch": li.controller_epoch, "zk_version": li.zk_version,
                "replicas": list(ra.replicas), "adding": list(ra.adding), "removing": list(ra.removing),
                "kind": kind, "change": change, "cause_type": cause_type, "cause_seq": cause_seq, "seq": seq,
                "file": self._where[0], "line": self._where[1]}

    def _elected_rows(self, event, at, seq, etype) -> list[dict]:
        """`_row` of every partition state a new controller read (kind "elected"), with its
        assignment: a row per partition of the cluster, so built in one loop, the assignment's
        lists made once per distinct assignment (rows share them; nothing mutates a row's lists)."""
        snapshot = event.snapshot
        assigned = {topic: dict(parts) for topic, parts in snapshot.topics}
        lists: dict[int, tuple] = {}  # id(assignment) -> (replicas, adding, removing); the event holds them
        journal, controller_id, epoch = self.journal, self.controller_id, event.epoch
        file, line = self._where
        rows = []
        for tp, li in snapshot.partition_states:
            parts = assigned.get(tp.topic)
            ra = parts.get(tp.partition) if parts is not None else None
            if ra is None:
                continue
            ral = lists.get(id(ra))
            if ral is None:
                ral = lists[id(ra)] = (list(ra.replicas), list(ra.adding), list(ra.removing))
            rows.append({"time": at, "journal": journal, "controller_id": controller_id, "epoch": epoch,
                         "topic": tp.topic, "partition": tp.partition, "leader": li.leader,
                         "leader_epoch": li.leader_epoch, "isr": list(li.isr), "controller_epoch": li.controller_epoch,
                         "zk_version": li.zk_version, "replicas": ral[0], "adding": ral[1], "removing": ral[2],
                         "kind": "elected", "change": None, "cause_type": etype, "cause_seq": seq, "seq": seq,
                         "file": file, "line": line})
        return rows

    def _broker(self, broker, broker_epoch, change, at, epoch, seq) -> dict:
        return {"journal": self.journal, "controller_id": self.controller_id, "epoch": epoch, "time": at, "seq": seq,
                "broker": broker, "broker_epoch": broker_epoch, "change": change}

    def _decide(self, c, old, new, commands, seq, at, etype) -> dict:
        outbox = new.pending.get(c.write_id)
        intents = outbox.intents if outbox is not None else {}
        unclean = set()
        for cmd in commands:
            if type(cmd) is C.LogStateChanges:
                for entry in cmd.entries:
                    if entry.ok and "unclean" in entry.detail:
                        unclean.update(entry.partitions)
        allowed: dict[str, bool] = {}
        entries = []
        tps = [pw.tp for pw in c.writes]
        # an assignment's lists made once (a cluster has few distinct assignments; rows share
        # the lists, which nothing mutates)
        lists: dict[int, tuple] = {id(None): ([], [], [])}
        for pw, ra, before in zip(c.writes, _assignments(new.partitions, tps), _leaders(old.partitions, tps)):
            tp, li = pw.tp, pw.leader_isr
            ral = lists.get(id(ra))
            if ral is None:
                ral = lists[id(ra)] = (list(ra.replicas), list(ra.adding), list(ra.removing), ra)
            topic_allows = allowed.get(tp.topic)
            if topic_allows is None:
                topic_allows = allowed[tp.topic] = new.unclean_allowed(tp.topic)
            entries.append([tp.topic, tp.partition, li.leader, li.leader_epoch, list(li.isr), li.controller_epoch,
                            li.zk_version, pw.expected_version, ral[0], ral[1], ral[2],
                            [list(i) for i in intents.get(tp, ())], tp in unclean, topic_allows, before])
        return {"journal": self.journal, "controller_id": self.controller_id, "write_id": c.write_id, "seq": seq,
                "time": at, "cause_type": etype, "epoch": new.epoch, "entries": entries,
                "file": self._where[0], "line": self._where[1]}

    def _reassignments(self, old, new, at, seq, etype) -> None:
        for tp in sorted(new.reassigning - old.reassigning):
            ra = new.partitions[tp].assignment
            self.reassignments.append({"journal": self.journal, "epoch": new.epoch, "time": at, "seq": seq,
                                       "topic": tp.topic, "partition": tp.partition, "change": "start",
                                       "origin": list(ra.origin_replicas), "target": list(ra.target_replicas),
                                       "cause_type": etype})
        for tp in sorted(old.reassigning - new.reassigning):
            info = new.partitions.get(tp)
            if info is None:
                change, replicas = "deleted", []
            elif not info.assignment.is_being_reassigned:
                change, replicas = "completed", list(info.assignment.replicas)
            else:
                change, replicas = "cancelled", list(info.assignment.replicas)
            self.reassignments.append({"journal": self.journal, "epoch": new.epoch, "time": at, "seq": seq,
                                       "topic": tp.topic, "partition": tp.partition, "change": change,
                                       "origin": None, "target": replicas, "cause_type": etype})

    # -- output ------------------------------------------------------------------------------------

    def leftovers(self) -> tuple[list[dict], list[dict]]:
        """Decisions still waiting for an outcome (and those that never can), and outcomes whose
        decision is not in this unit: joined across units by `stitch_writes`."""
        return list(self.decisions.values()) + self.unconfirmed, self.orphans


def confirm(decision: dict, outcome: dict) -> tuple[list[dict], list[dict]]:
    """Timeline and election rows of one write decision and its `PartitionStatesWritten`."""
    versions = {(t, p): v for t, p, v in outcome["versions"]}
    conflicts = {(t, p): li for t, p, li in outcome["conflicts"]}
    timeline, elections = [], []
    base = {"time": outcome["time"], "journal": decision["journal"], "controller_id": decision["controller_id"],
            "epoch": decision["epoch"], "cause_type": decision["cause_type"], "cause_seq": decision["seq"],
            "seq": outcome["seq"], "file": outcome.get("file"), "line": outcome.get("line")}
    for (topic, p, leader, lepoch, isr, cepoch, zkv, expected, replicas, adding, removing, intents, unclean,
         allowed, before) in decision["entries"]:
        key = (topic, p)
        change = "+".join(":".join(str(x) for x in i) for i in intents) or None
        if key not in conflicts:  # landed: at the listed version, else at the predicted one
            outcome_kind = "landed"
            timeline.append({**base, "topic": topic, "partition": p, "leader": leader, "leader_epoch": lepoch,
                             "isr": isr, "controller_epoch": cepoch, "zk_version": versions.get(key, zkv),
                             "replicas": replicas, "adding": adding, "removing": removing, "kind": "write",
                             "change": change})
        else:
            outcome_kind = "conflict"
            fresh = conflicts[key]
            if fresh is not None:
                timeline.append({**base, "topic": topic, "partition": p, "leader": fresh[0], "leader_epoch": fresh[1],
                                 "isr": fresh[2], "controller_epoch": fresh[3], "zk_version": fresh[4],
                                 "replicas": replicas, "adding": adding, "removing": removing, "kind": "conflict",
                                 "change": change})
        row = _election(decision, topic, p, leader, lepoch, isr, intents, unclean, allowed, before, outcome_kind)
        if row is not None:
            row["time"] = outcome["time"]
            row["confirm_seq"] = outcome["seq"]
            elections.append(row)
    return timeline, elections


def _election(decision, topic, p, leader, lepoch, isr, intents, unclean, allowed, before, outcome_kind):
    strategy = None
    for intent in intents:
        if intent and intent[0] == WriteIntent.ELECT:
            strategy = intent[1]
        elif intent and intent[0] == WriteIntent.INIT and strategy is None:
            strategy = "init"
    if strategy is None:
        return None
    kind = "initial" if strategy == "init" else ELECTION_KINDS.get(strategy, strategy)
    if unclean:
        kind = "unclean"
    return {"time": decision["time"], "decided_at": decision["time"], "journal": decision["journal"],
            "controller_id": decision["controller_id"], "epoch": decision["epoch"], "topic": topic, "partition": p,
            "kind": kind, "strategy": strategy, "leader_before": before, "leader": leader, "leader_epoch": lepoch,
            "isr": isr, "unclean": bool(unclean), "unclean_allowed": bool(allowed),
            "admin_requested": strategy == Strategy.OFFLINE_UNCLEAN, "outcome": outcome_kind,
            "cause_type": decision["cause_type"], "cause_seq": decision["seq"], "confirm_seq": None,
            "file": decision.get("file"), "line": decision.get("line")}


def unconfirmed_elections(decisions: Iterable[dict]) -> list[dict]:
    """Election rows of decisions that never got an outcome (fenced, resigned, crashed, or the
    journal ends)."""
    out = []
    for d in decisions:
        for (topic, p, leader, lepoch, isr, cepoch, zkv, expected, replicas, adding, removing, intents, unclean,
             allowed, before) in d["entries"]:
            row = _election(d, topic, p, leader, lepoch, isr, intents, unclean, allowed, before, "unconfirmed")
            if row is not None:
                out.append(row)
    return out


def stitch_writes(decisions: list[dict], outcomes: list[dict]) -> tuple[list[dict], list[dict], int]:
    """Join leftover outcomes to leftover decisions of the same journal and write id (the latest
    decision before the outcome: write ids restart after a process restart). Returns timeline
    rows, election rows, and the number of outcomes whose decision was never re-executed."""
    by_key: dict[tuple, list[dict]] = {}
    for d in decisions:
        by_key.setdefault((d["journal"], d["write_id"]), []).append(d)
    for ds in by_key.values():
        ds.sort(key=lambda d: d["seq"])
    used = set()
    timeline, elections, lost = [], [], 0
    for o in sorted(outcomes, key=lambda o: o["seq"]):
        candidates = [d for d in by_key.get((o["journal"], o["write_id"]), ()) if d["seq"] < o["seq"]
                      and id(d) not in used]
        if not candidates:
            lost += 1
            continue
        d = candidates[-1]
        used.add(id(d))
        t, e = confirm(d, o)
        timeline.extend(t)
        elections.extend(e)
    elections.extend(unconfirmed_elections(d for d in decisions if id(d) not in used))
    return timeline, elections, lost


def fold_unit(unit: dict, journal_name: str, head_text: str, records: Iterable[tuple]) -> UnitFold:
    """Fold one unit; see `UnitFold.run`."""
    return UnitFold(unit, journal_name).run(head_text, records)


def compare_units(summaries: list[dict]) -> tuple[list[dict], list[dict]]:
    """Each unit's final state against the next unit's snapshot, per journal. Returns findings
    and the term ends implied by restarts found at unit boundaries."""
    findings, ends = [], []
    by_journal: dict[str, list[dict]] = {}
    for s in summaries:
        by_journal.setdefault(s["journal"], []).append(s)
    for journal, units in sorted(by_journal.items()):
        units.sort(key=lambda s: s["index"])
        for a, b in zip(units, units[1:]):
            if a["final_hash"] is None or b["snapshot_hash"] is None or a["final_hash"] == b["snapshot_hash"]:
                continue
            if b["snapshot_initial"]:
                findings.append(finding("process-restart", "info", f"the controller process restarted between seq "
                                        f"{a['last_seq']} and the snapshot at seq {b['snapshot_seq']}; replay continues "
                                        "from that snapshot", journal=journal, file=b["head_path"], line=1,
                                        seq=b["snapshot_seq"], time=b["first_at"]))
                ends.append({"journal": journal, "kind": "restart", "time": a["last_at"], "seq": b["snapshot_seq"]})
                continue
            differ = sorted(k for k in set(a["final_fields"]) | set(b["snapshot_fields"])
                            if a["final_fields"].get(k) != b["snapshot_fields"].get(k))
            findings.append(finding("snapshot-mismatch", "violation",
                                    f"the state re-executed up to seq {a['last_seq']} differs from the snapshot at seq "
                                    f"{b['snapshot_seq']} in: {', '.join(differ)}", journal=journal,
                                    file=b["head_path"], line=1, seq=b["snapshot_seq"], time=b["first_at"]))
    return findings, ends
