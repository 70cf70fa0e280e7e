"""The state-change log (every transition, every partition, in its own file) and the decision
log, through a real broker failure: in-process nodes in text, then real `kctl node` processes
with `--log-format json` whose every output line must be one JSON object."""
from __future__ import annotations

import asyncio
import json
import logging
import re

import pytest

from adapters.observability import logformat, statelog
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.sim.cluster import LocalCluster, controller, live_broker_ids, partition_states, wait_for
from adapters.observability.decisionlog import Decision
from adapters.node import ClusterNode, NodeConfig
from adapters.zookeeper.session import force_expire
from controller_core import commands as C
from controller_core.values import ReplicaAssignment, TopicPartition

FAST = {"zookeeper.session.timeout.ms": "2000", "auto.leader.rebalance.enable": "false",
        "replica.catch.up.delay.ms": "100", "replica.lag.time.max.ms": "1500"}
PARTITIONS = 6


async def _active(nodes):
    found = [n for n in nodes if n.active and n.loop.state.active]
    return found[0] if len(found) == 1 else None


async def _all_led_by(admin, topic, broker_id):
    states = await partition_states(admin, topic)
    return len(states) == PARTITIONS and all(li.leader == broker_id for li in states.values())


def _listed(line: str) -> set[str]:
    return set(re.findall(r"\bt-\d+\b", line.split(" partition(s): ", 1)[1]))


async def test_a_failover_lists_every_partition_and_the_decision_names_the_failed_broker(
        zk_connect, tmp_path, admin, caplog):
    caplog.set_level(logging.INFO, logger="kctl.controller")
    caplog.set_level(logging.INFO, logger="kctl.watches")
    nodes = []
    try:
        for i in (1, 2, 3):
            node = ClusterNode(NodeConfig(broker_id=i, zookeeper=zk_connect, journal_dir=str(tmp_path / f"node-{i}"),
                                          settings=dict(FAST)))
            await node.start()
            nodes.append(node)
        ctrl = await wait_for(lambda: _active(nodes), what="a controller")
        await wait_for(lambda: asyncio.sleep(0, result=len(ctrl.loop.state.brokers) == 3), what="3 brokers")
        victim, survivor = [n for n in nodes if n is not ctrl][0], ctrl
        await admin.create(zkpaths.topic("t"), zkdata.encode_topic_assignment(
            {p: ReplicaAssignment((victim.broker_id, survivor.broker_id)) for p in range(PARTITIONS)}))
        await wait_for(lambda: _all_led_by(admin, "t", victim.broker_id), what="t led by the victim")

        await victim.crash()
        await force_expire(zk_connect, victim.zk.session_id, victim.zk.password)
        await wait_for(lambda: _all_led_by(admin, "t", survivor.broker_id), what="t failed over")
        await asyncio.to_thread(ctrl.state_changes.flush)
    finally:
        for n in nodes:
            if not n._stopping:
                await n.close()

    every = {f"t-{p}" for p in range(PARTITIONS)}
    lines = (tmp_path / f"node-{ctrl.broker_id}" / statelog.FILE_NAME).read_text().splitlines()
    head = f"[Controller id={ctrl.broker_id} epoch=1] BrokersChanged (seq "
    failover = [line for line in lines if head in line]
    offline = [line for line in failover if "partition OnlinePartition -> OfflinePartition" in line]
    online = [line for line in failover if "partition OfflinePartition -> OnlinePartition" in line]
    replica = [line for line in failover if f"replica {victim.broker_id} OnlineReplica -> OfflineReplica" in line]
    assert len(offline) == len(online) == len(replica) == 1, lines
    assert _listed(offline[0]) == _listed(online[0]) == _listed(replica[0]) == every
    assert online[0].count(f"(leader {survivor.broker_id}, epoch 1, isr {survivor.broker_id})") == PARTITIONS
    # the other nodes' transitions are not in this node's file, and the broker that was not
    # the controller has a file with nothing in it
    assert all(f"[Controller id={ctrl.broker_id} " in line for line in lines)
    assert (tmp_path / f"node-{victim.broker_id}" / statelog.FILE_NAME).read_text() == ""

    # "seq N" is the journal record of the BrokersChanged that caused it
    from adapters.journal.format import read_journal
    seq = int(re.search(r"\(seq (\d+)\)", offline[0]).group(1))
    record = next(r for r in read_journal(tmp_path / f"node-{ctrl.broker_id}") if r["seq"] == seq)
    assert record["type"] == "event" and record["body"]["type"] == "BrokersChanged"

    decisions = [r.msg for r in caplog.records if r.name == "kctl.controller" and isinstance(r.msg, Decision)
                 and r.msg.event == "BrokersChanged" and r.msg.seq == seq]
    assert len(decisions) == 1
    text = str(decisions[0])
    assert f"broker {victim.broker_id} failed (registration gone)" in text
    assert f"{PARTITIONS} partitions went offline" in text
    assert f"{PARTITIONS} leaders elected (offline election, 0 unclean)" in text
    assert decisions[0].fields()["brokers_failed"] == [victim.broker_id]
    # the controller said how long reading the cluster took it, part by part, when elected
    reads = [r.getMessage() for r in caplog.records if r.name == "kctl.watches" and "read the cluster" in r.getMessage()]
    assert reads and all(re.fullmatch(r"read the cluster in [0-9.]+ s: the watches and \d+ brokers \([0-9.]+ s\), \d+ "
                                      r"topics \([0-9.]+ s more\), \d+ partition states \([0-9.]+ s, read and parsed\)", m)
                         for m in reads), reads


def test_json_lines_carry_the_stable_keys_and_the_full_partition_list():
    """The formatter alone, on a state-change record and a plain record with a traceback."""
    from controller_core.state import ControllerConfig, initial_state

    state = initial_state(ControllerConfig(broker_id=1))
    entry = C.StateChange("OnlinePartition", "OfflinePartition", tuple(TopicPartition("t", p) for p in range(3)))
    formatter = logformat.JsonFormatter()
    record = logging.LogRecord("kctl.state.change", logging.INFO, __file__, 1,
                               statelog.StateChangeLine(1, 4, "BrokersChanged", 17, entry, state), None, None)
    line = formatter.format(record)
    obj = json.loads(line)
    assert "\n" not in line
    assert {k: obj[k] for k in ("level", "logger", "controller_id", "controller_epoch", "event", "event_seq",
                                "transition", "partitions")} == {
        "level": "INFO", "logger": "kctl.state.change", "controller_id": 1, "controller_epoch": 4,
        "event": "BrokersChanged", "event_seq": 17, "transition": "OnlinePartition->OfflinePartition",
        "partitions": ["t-0", "t-1", "t-2"]}
    assert isinstance(obj["ts"], int) and obj["message"].endswith("for 3 partition(s)")
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("kctl", logging.ERROR, __file__, 1, "failed %s", ("x",), __import__("sys").exc_info())
    line = formatter.format(record)
    obj = json.loads(line)
    assert "\n" not in line and obj["message"] == "failed x" and "ValueError: boom" in obj["exc"]


# -- real processes in JSON ------------------------------------------------------------------------


async def _controller(admin):
    holder, _ = await controller(admin)
    return holder


async def _brokers(admin, ids):
    return set(ids) <= set(await live_broker_ids(admin))


def _json_lines(text: str) -> list[dict]:
    objects = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            obj = json.loads(line)
        except ValueError:
            raise AssertionError(f"line {n} is not JSON: {line!r}") from None
        assert isinstance(obj, dict) and {"ts", "level", "logger", "message"} <= obj.keys(), line
        objects.append(obj)
    return objects


async def test_json_nodes_write_nothing_but_json_lines(zk_connect, tmp_path, admin):
    settings = {**FAST, "controlled.shutdown.max.retries": "0"}
    with LocalCluster(zk_connect, tmp_path, settings=settings, extra_args=["--log-format", "json"]) as local:
        for i in (1, 2, 3):
            local.start_node(i)
        await wait_for(lambda: _brokers(admin, (1, 2, 3)), timeout=60, what="3 brokers")
        holder = await wait_for(lambda: _controller(admin), what="a controller")
        victim, survivor = [b for b in (1, 2, 3) if b != holder][0], holder
        await admin.create(zkpaths.topic("t"), zkdata.encode_topic_assignment(
            {p: ReplicaAssignment((victim, survivor)) for p in range(PARTITIONS)}))
        await wait_for(lambda: _all_led_by(admin, "t", victim), what="t led by the victim")
        local.kill(victim)
        await wait_for(lambda: _all_led_by(admin, "t", survivor), what="t failed over")
        state_log = tmp_path / f"node-{holder}" / statelog.FILE_NAME

        async def written():
            return "OfflinePartition->OnlinePartition" in state_log.read_text()
        await wait_for(written, what="the failover in the state-change log")
        for b in (1, 2, 3):
            if b != victim:
                assert local.stop(b, timeout=30) == 0

    changes = _json_lines(state_log.read_text())
    failover = [o for o in changes if o["event"] == "BrokersChanged" and o["kind"] == "partition"]
    assert {o["transition"] for o in failover} == {"OnlinePartition->OfflinePartition", "OfflinePartition->OnlinePartition"}
    every = [f"t-{p}" for p in range(PARTITIONS)]
    for o in failover:
        assert o["controller_id"] == holder and o["controller_epoch"] == 1 and isinstance(o["event_seq"], int)
        assert sorted(o["partitions"]) == sorted(every) and o["count"] == PARTITIONS
    for b in (1, 2, 3):
        _json_lines((tmp_path / f"node-{b}.log").read_text())
    logged = _json_lines((tmp_path / f"node-{holder}.log").read_text())
    # (stopping the third broker before the controller is a second BrokersChanged: only the
    # victim's decision is about the failover)
    decision = [o for o in logged if o["logger"] == "kctl.controller" and o.get("event") == "BrokersChanged"
                and victim in (o.get("brokers_failed") or ())]
    assert len(decision) == 1 and decision[0]["brokers_failed"] == [victim]
    assert f"broker {victim} failed (registration gone)" in decision[0]["message"]
    assert decision[0]["leaders_elected"] == PARTITIONS and decision[0]["unclean_elections"] == 0


def test_a_resignation_is_not_described_as_brokers_failing_or_topics_deleted():
    from adapters.observability.decisionlog import describe
    from controller_core import events as E
    from controller_core.step import step
    from tests.core.builders import AT, elected

    before, _ = elected(brokers=(1, 2, 3), topics={"t": [[1, 2, 3]]})
    event = E.ControllerResigned(at=AT, reason="ZooKeeper session expired")
    after, commands = step(before, event)
    level, parts, fields = describe(event, before, after, commands)
    line = "; ".join(parts)
    assert "resigned: ZooKeeper session expired" in line
    assert "failed" not in line and "deleted" not in line and "topics_deleted" not in fields


# -- a large line is rendered from the image's columns ---------------------------------------------


def _reference(line: statelog.StateChangeLine) -> tuple[str, list]:
    """The line as one partition at a time reads it from the state (the definition)."""
    items, leader_isr = [], []
    for p in line.entry.partitions:
        info = line.state.partitions.get(p)
        li = info.leader_isr if info is not None else None
        items.append(str(p) if li is None else
                     f"{p} (leader {li.leader}, epoch {li.leader_epoch}, isr {','.join(map(str, li.isr))})")
        leader_isr.append(None if li is None else [li.leader, li.leader_epoch, list(li.isr)])
    return f"{line.summary()}: {', '.join(items)}", leader_isr


@pytest.mark.parametrize("case", ["columns", "a partition without a state", "an odd partition", "small"])
def test_a_large_line_lists_what_each_partition_holds(case):
    from controller_core.values import LeaderIsr
    from tests.core.builders import elected

    topics = {f"t{k}": [[1 + (p + k) % 4, 1 + (p + k + 1) % 4, 1 + (p + 2 * k + 3) % 4] for p in range(50)]
              for k in range(3)}
    topics = {t: [list(dict.fromkeys(r)) for r in parts] for t, parts in topics.items()}
    states = {TopicPartition(t, p): LeaderIsr(r[-1], p, tuple(r[::-1][: 1 + p % len(r)]), 1, p % 3)
              for t, parts in topics.items() for p, r in enumerate(parts)}
    if case == "an odd partition":
        states[TopicPartition("t1", 7)] = LeaderIsr(2, 2 ** 40, (2,), 1, 0)  # beyond the image's int32 columns
    state, _ = elected(brokers=(1, 2, 3, 4), topics=topics, states=states)
    tps = [TopicPartition(t, p) for t in topics for p in range(50)][::-1]
    if case == "a partition without a state":
        tps.insert(40, TopicPartition("gone", 0))
    if case == "small":
        tps = tps[:5]
    entry = C.StateChange("OfflinePartition", "OnlinePartition", tuple(tps))
    line = statelog.StateChangeLine(1, 4, "BrokersChanged", 17, entry, state)
    assert (line._leader_isrs() is not None) == (case == "columns")
    text, leader_isr = _reference(line)
    assert str(line) == text
    assert line.fields()["leader_isr"] == leader_isr
    assert line.fields()["partitions"] == [str(p) for p in tps]
    plain = statelog.StateChangeLine(1, 4, "BrokersChanged", 17,
                                     C.StateChange("OnlinePartition", "OfflinePartition", tuple(tps)), state)
    assert str(plain) == f"{plain.summary()}: {', '.join(map(str, tps))}"
