"""The chaos soak's verdict: what must hold once everything is healed and the cluster settled.

1. `leaders`: every partition with a live replica has a leader, the leader is live and in its
   ISR, and the ISR is within the assignment (read from ZooKeeper);
2. `reassignments`: no reassignment whose targets are alive is stuck: `/admin/reassign_partitions`
   is gone or holds only partitions with a dead target, no topic znode still lists adding or
   removing replicas for a partition whose targets are all alive, and none was lost: every
   partition the admin tool reassigned (its last request) has the requested replicas, unless
   its topic was deleted since;
3. `deletions`: every topic whose deletion was requested is gone (`/brokers/topics/<t>`,
   `/config/topics/<t>` and its `/admin/delete_topics/<t>` marker), and no marker is left at all;
4. `metadata`: every live broker's metadata cache, asked over the control channel (Metadata),
   holds exactly what ZooKeeper says: the live brokers, the controller epoch, and every
   partition's leader, leader epoch, ISR and replicas; `kafka-client`: so does a stock Kafka
   client's `list_topics` through a broker's Kafka listener;
5. `replay`: the replay of every node's journal finds no violation (in particular no write
   accepted from a fenced controller): `kctl replay` on Spark, or the same fold and audit in
   this process (`replay.local`);
6. `processes`: no node process exited unless the harness stopped it;
7. `throttles`: every throttled reassignment was verified complete and, once the operator's last
   verify ran with every broker up, no `*.replication.throttled.*` key is left in any
   `/config/topics/<t>` or `/config/brokers/<id>`;
8. `log-dirs`: every log-dir event notification was consumed by the controller
   (`/log_dir_event_notification` is empty), and every node's log dirs are directories again;
9. `log-dir-failures`: after every log-dir failure, within `LOG_DIR_DEADLINE`, no replica in the
   failed dir led its partition or shared an ISR with others (checked during the run, see
   faults.py).

Checks 1-4, 7 and 8 read the live cluster and are repeated until they all pass (that is
"settled"); 5, 6 and 9 run on the journals and the records of the run once the nodes are stopped.
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import attrs

from controller_core.values import TopicPartition

from adapters import admin
from adapters.admin.cluster_state import read_assignments, read_children, read_states, read_topic_names
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.control import requests as Q
from adapters.controller.log_dir_events import LOG_DIR_EVENT_NOTIFICATION
from adapters.control.transport import ControlChannelError, ControlClient
from adapters.zookeeper.session import NoNode, ZkSession

SAMPLES = 10  # problems listed per check (all are counted)


@attrs.frozen
class Check:
    name: str
    ok: bool
    detail: str
    count: int = 0  # problems found
    problems: tuple[str, ...] = ()  # the first SAMPLES of them

    def to_json(self) -> dict:
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "problems_found": self.count,
                "problems": list(self.problems)}


def check_from(name: str, problems: list[str], passed: str, failed: str) -> Check:
    """A passing check when there are no `problems`; `failed` may use {n}, their number."""
    if problems:
        return Check(name, False, failed.format(n=len(problems)), len(problems), tuple(problems[:SAMPLES]))
    return Check(name, True, passed)


@attrs.frozen
class ClusterView:
    """One read of everything the checks look at in ZooKeeper."""

    brokers: dict  # id -> BrokerInfo
    controller_epoch: int
    assignments: dict  # topic -> {partition: ReplicaAssignment}
    states: dict  # TopicPartition -> LeaderIsr
    marked: frozenset  # topics under /admin/delete_topics
    configs: frozenset  # topics with /config/topics/<t>
    reassigning: tuple  # ((TopicPartition, target replicas), ...) in /admin/reassign_partitions


async def read_cluster(zk: ZkSession) -> ClusterView:
    brokers = await admin.live_brokers(zk)
    try:
        data, _ = await zk.get(zkpaths.CONTROLLER_EPOCH)
        epoch = zkdata.decode_controller_epoch(data)
    except NoNode:
        epoch = 0
    assignments = {t: a for t, (a, _) in (await read_assignments(zk, await read_topic_names(zk))).items()}
    states = await read_states(zk, [TopicPartition(t, p) for t, a in assignments.items() for p in a])
    try:
        data, _ = await zk.get(zkpaths.REASSIGN_PARTITIONS)
        reassigning = tuple(zkdata.decode_reassignment(data))
    except NoNode:
        reassigning = ()
    return ClusterView(brokers, epoch, assignments, states, frozenset(await read_children(zk, zkpaths.DELETE_TOPICS)),
                       frozenset(await read_children(zk, zkpaths.CONFIG_TOPICS)), reassigning)


# -- 1. leaders ---------------------------------------------------------------------------------------


def check_leaders(view: ClusterView) -> Check:
    live = set(view.brokers)
    problems = []
    total = 0
    for topic, assignment in sorted(view.assignments.items()):
        if topic in view.marked:
            continue  # being deleted: check 3's business
        for p, ra in sorted(assignment.items()):
            total += 1
            tp = TopicPartition(topic, p)
            if not live & set(ra.replicas):
                continue  # no live replica: nobody can lead it
            li = view.states.get(tp)
            if li is None:
                problems.append(f"{tp}: no state znode (replicas {list(ra.replicas)})")
            elif li.leader < 0:
                problems.append(f"{tp}: no leader (isr {list(li.isr)}, replicas {list(ra.replicas)})")
            elif li.leader not in live:
                problems.append(f"{tp}: leader {li.leader} is not live")
            elif li.leader not in li.isr:
                problems.append(f"{tp}: leader {li.leader} is not in its isr {list(li.isr)}")
            elif not set(li.isr) <= set(ra.replicas):
                problems.append(f"{tp}: isr {list(li.isr)} is not within the assignment {list(ra.replicas)}")
    return check_from("leaders", problems, f"all {total} partitions have a live leader in their ISR, ISR within "
                  "the assignment", "{n} partition(s) without a proper leader or ISR")


# -- 2. reassignments -------------------------------------------------------------------------------


def check_reassignments(view: ClusterView, requested=None) -> Check:
    """`requested`: {TopicPartition: target} of the reassignments the admin tool wrote."""
    live = set(view.brokers)
    problems = []
    waiting = 0
    for tp, target in view.reassigning:
        if set(target) <= live:
            problems.append(f"{tp} -> {list(target)}: still in /admin/reassign_partitions, every target is live")
        else:
            waiting += 1
    listed = {tp for tp, _ in view.reassigning}
    for topic, assignment in sorted(view.assignments.items()):
        for p, ra in sorted(assignment.items()):
            tp = TopicPartition(topic, p)
            if ra.is_being_reassigned and tp not in listed and set(ra.target_replicas) <= live:
                problems.append(f"{tp}: topic znode still has adding {list(ra.adding)} / removing "
                                f"{list(ra.removing)} with no reassignment requested")
    done = 0
    for tp, target in sorted((requested or {}).items()):
        ra = view.assignments.get(tp.topic, {}).get(tp.partition)
        if ra is None or tp.topic in view.marked or tp in listed:
            continue  # deleted since, or pending (above)
        if tuple(ra.replicas) != tuple(target):
            problems.append(f"{tp}: reassignment to {list(target)} was requested and is not pending, but the "
                            f"replicas are {list(ra.replicas)}")
        else:
            done += 1
    passed = (f"{done} requested reassignment(s) done, " +
              ("none left" if not view.reassigning else f"{waiting} partition(s) wait for a dead target"))
    return check_from("reassignments", problems, passed, "{n} reassignment(s) stuck with live targets")


# -- 3. deletions ------------------------------------------------------------------------------------


def check_deletions(view: ClusterView, requested) -> Check:
    problems = []
    for topic in sorted(requested):
        left = [what for what, there in (("/brokers/topics", topic in view.assignments),
                                         ("/config/topics", topic in view.configs),
                                         ("/admin/delete_topics", topic in view.marked)) if there]
        if left:
            problems.append(f"{topic}: deletion requested, still in {', '.join(left)}")
    for topic in sorted(view.marked - set(requested)):
        problems.append(f"{topic}: /admin/delete_topics/{topic} is left")
    return check_from("deletions", problems, f"all {len(requested)} deleted topic(s) are gone, no marker left",
                  "{n} deletion(s) not completed")


# -- 4. metadata ---------------------------------------------------------------------------------------


def _led_partitions(view: ClusterView):
    """(partition, assignment, leader-and-ISR) of every partition that has a state, topics
    marked for deletion left out: what every broker's metadata must show."""
    for topic, assignment in view.assignments.items():
        if topic in view.marked:
            continue
        for p, ra in assignment.items():
            tp = TopicPartition(topic, p)
            li = view.states.get(tp)
            if li is not None:
                yield tp, ra, li


def expected_metadata(view: ClusterView) -> dict[str, dict]:
    return {f"{tp.topic}-{tp.partition}": {"leader": li.leader, "leader_epoch": li.leader_epoch, "isr": list(li.isr),
                                           "replicas": list(ra.replicas)}
            for tp, ra, li in _led_partitions(view)}


async def ask_metadata(host: str, port: int, timeout: float = 15.0) -> dict:
    client = ControlClient(host, port)
    try:
        return await client.request(Q.METADATA, {}, timeout=timeout)
    finally:
        await client.close()


async def check_metadata(view: ClusterView) -> Check:
    expected = expected_metadata(view)
    live = sorted(view.brokers)
    marked = view.marked
    answers = await asyncio.gather(*(ask_metadata(b.host, b.port) for b in view.brokers.values()),
                                   return_exceptions=True)
    problems = []
    for (b, info), answer in zip(view.brokers.items(), answers):
        if isinstance(answer, (ControlChannelError, OSError)):
            problems.append(f"broker {b} at {info.host}:{info.port}: no Metadata answer: {answer}")
            continue
        if isinstance(answer, BaseException):
            raise answer
        if answer.get("error"):
            problems.append(f"broker {b}: Metadata refused: {answer['error']}: {answer.get('message')}")
            continue
        if answer.get("brokers") != live:
            problems.append(f"broker {b}: live brokers {answer.get('brokers')} in its cache, ZooKeeper has {live}")
        if answer.get("controller_epoch") != view.controller_epoch:
            problems.append(f"broker {b}: controller epoch {answer.get('controller_epoch')} in its cache, "
                            f"ZooKeeper has {view.controller_epoch}")
        cache = {k: v for k, v in (answer.get("partitions") or {}).items() if k.rsplit("-", 1)[0] not in marked}
        for key in sorted(set(expected) | set(cache), key=_partition_order):
            want, got = expected.get(key), cache.get(key)
            if want == got:
                continue
            if got is None:
                problems.append(f"broker {b}: {key} missing from its cache (ZooKeeper: {_show(want)})")
            elif want is None:
                problems.append(f"broker {b}: {key} in its cache ({_show(got)}) but not in ZooKeeper")
            else:
                problems.append(f"broker {b}: {key} is {_show(got)} in its cache, {_show(want)} in ZooKeeper")
    return check_from("metadata", problems, f"{len(live)} brokers' caches equal ZooKeeper ({len(expected)} partitions)",
                  "{n} difference(s) between the brokers' caches and ZooKeeper")


def _partition_order(key: str):
    topic, _, p = key.rpartition("-")
    return (topic, int(p) if p.isdigit() else -1)


def _show(v: dict) -> str:
    return (f"leader {v['leader']} epoch {v['leader_epoch']} isr {v['isr']} replicas {v['replicas']}"
            if isinstance(v, dict) and "leader" in v else repr(v))


async def check_kafka_client(view: ClusterView, controller_id: int | None) -> Check:
    """4b. `kafka-client`: a stock client (confluent-kafka's AdminClient.list_topics, through one
    live broker's Kafka listener) sees ZooKeeper's brokers, controller and, per partition, leader,
    replicas and ISR (topics being deleted aside)."""
    from adapters.sim import stock_client as stock

    if not stock.available():
        return Check("kafka-client", True, "not run (confluent-kafka is not installed)")
    if not view.brokers:
        return Check("kafka-client", False, "no live broker to ask", 1, ("no live broker",))
    b, info = min(view.brokers.items())
    try:
        seen = await stock.list_topics_async(f"{info.host}:{info.port}")
    except Exception as exc:  # librdkafka's KafkaException: no answer in time
        return Check("kafka-client", False, f"broker {b}: no metadata for a stock client", 1, (str(exc),))
    seen["partitions"] = {tp: v for tp, v in seen["partitions"].items() if tp.topic not in view.marked}
    expected = {tp: (li.leader, list(ra.replicas), list(li.isr)) for tp, ra, li in _led_partitions(view)}
    brokers = {i: f"{x.host}:{x.port}" for i, x in view.brokers.items()}
    problems = stock.differences(seen, controller_id, brokers, expected)
    return check_from("kafka-client", problems, f"a stock client at broker {b} sees ZooKeeper's metadata "
                                                f"({len(expected)} partitions; {stock.client_version()})",
                      "{n} difference(s) between a stock client's metadata and ZooKeeper")


async def cluster_checks(zk: ZkSession, requested_deletions) -> list[Check]:
    """Checks 1-4 on one read of ZooKeeper."""
    view = await read_cluster(zk)
    return [check_leaders(view), check_reassignments(view), check_deletions(view, requested_deletions),
            await check_metadata(view)]


# -- 7. throttles ----------------------------------------------------------------------------------


def check_throttles(pending: str | None, left: list[str], before: list[str]) -> Check:
    """`pending`: why the last throttled reassignment is not verified yet (None: it is); `left`:
    throttle keys found after the final removal; `before`: those found before it."""
    problems = ([f"not verified: {pending}"] if pending else []) + [f"{k} is left" for k in left]
    stale = f" ({len(before)} left by verifies made while a broker was down, removed by it)" if before else ""
    return check_from("throttles", problems, f"no throttle key left after the last verify{stale}",
                      "{n} throttle problem(s)")


# -- 8. log dirs ---------------------------------------------------------------------------------------


async def check_log_dirs(zk: ZkSession, fleet) -> Check:
    problems = []
    events = await read_children(zk, LOG_DIR_EVENT_NOTIFICATION)
    if events:
        problems.append(f"/log_dir_event_notification still holds {', '.join(events[:5])}")
    for b, dirs in sorted(fleet.log_dirs.items()):
        broken = [d.name for d in dirs if not d.is_dir()]
        if broken:
            problems.append(f"node {b}: log dir(s) {', '.join(broken)} not replaced")
    return check_from("log-dirs", problems, "no log-dir event notification left, every node's log dirs in place",
                      "{n} log-dir problem(s)")


def check_log_dir_failures(problems: list[str], handled: int) -> Check:
    return check_from("log-dir-failures", problems, f"{handled} log-dir failure(s), each with its replicas offline "
                      "soon after (not leaders, out of shared ISRs)",
                      "{n} log-dir failure(s) whose replicas stayed leaders or in shared ISRs")


# -- 5. replay ---------------------------------------------------------------------------------------


def replay_local(journals: Path, out: Path) -> tuple[Check, dict]:
    """The fold and audit in this process (replay.local); violations are saved to
    `out/replay-violations.json`. Returns the check and the replay's statistics."""
    from replay import history
    from replay.local import replay

    result = replay(journals)
    violations = [f for f in result.findings if f["severity"] == "violation"]
    _, counts = history.verdict(result.findings)
    (out / "replay-violations.json").write_text(json.dumps(violations, indent=1, default=str))
    problems = [f"{f['rule']}: {f.get('detail')} ({f.get('journal')} seq {f.get('seq')})" for f in violations]
    events = result.stats.get("events", 0)
    return check_from("replay", problems, f"replay.local: {events:,} events from {result.stats.get('journals', 0)} "
                      f"journals, no violation ({counts.get('warning', 0)} warnings)",
                      "replay.local: {n} violation(s), see replay-violations.json"), result.stats


def replay_spark(journals: Path, out: Path) -> tuple[Check, dict]:
    """`kctl replay` (the Spark job) in a child process; its output goes to `out/replay.log`,
    its report to `out/replay/`."""
    report = out / "replay"
    with open(out / "replay.log", "wb") as log:
        code = subprocess.run([sys.executable, "-m", "adapters.cli", "replay", "--journal", str(journals),
                               "--out", str(report)], stdout=log, stderr=subprocess.STDOUT).returncode
    try:
        summary = json.loads((report / "summary.json").read_text())
    except (OSError, ValueError):
        return Check("replay", False, f"kctl replay exited {code} without a summary (see replay.log)", 1,
                     (f"kctl replay exit status {code}",)), {}
    counts = summary.get("counts") or []
    problems = [f"{rule}: {n}" for severity, rule, n in counts if severity == "violation"]
    violations = sum(n for severity, _, n in counts if severity == "violation")
    stats = summary.get("stats") or {}
    if code != 0 and not problems:
        problems = [f"kctl replay exit status {code}"]
    if problems:
        return Check("replay", False, f"kctl replay (Spark): {violations} violation(s); report in {report}",
                     max(violations, 1), tuple(problems[:SAMPLES])), stats
    warnings = sum(n for severity, _, n in counts if severity == "warning")
    return Check("replay", True, f"kctl replay (Spark): {stats.get('events', 0):,} events from "
                 f"{stats.get('journals', 0)} journals, no violation ({warnings} warnings)"), stats


# -- 6. processes ------------------------------------------------------------------------------------


def check_processes(exits: list[dict]) -> Check:
    problems = [f"node {e['node']} exited with code {e['code']}: {e['log_tail'].splitlines()[-1] if e['log_tail'] else ''}"
                for e in exits]
    return check_from("processes", problems, "no node exited unless stopped by the harness",
                  "{n} unexpected node exit(s)")
