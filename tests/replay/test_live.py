"""A journal written by live nodes (in this process, on the session's real ZooKeeper) replays to
the live final state and to the partition leaders ZooKeeper shows."""
from __future__ import annotations

import asyncio

from adapters.sim.cluster import partition_states, wait_for
from adapters.zookeeper.session import ZkSession
from replay import local
from tests.adapters.test_node import active, create_topic, start_nodes
from tests.replay.helpers import copy_tree, cut_at_clean_stop


async def test_live_journals_replay_to_the_live_state_and_zookeeper(zk_connect, tmp_path):
    admin = await ZkSession.connect(zk_connect)
    nodes = await start_nodes(zk_connect, tmp_path, ids=(1, 2, 3))
    try:
        first = await wait_for(lambda: active(nodes), what="a controller")
        await create_topic(admin, "a", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
        await create_topic(admin, "b", [[2, 3], [3, 1]])
        await wait_for(lambda: _has(admin, "a", 3), what="topic a")
        await wait_for(lambda: _has(admin, "b", 2), what="topic b")
        # a controller failover: the first controller's node goes away
        await first.close()
        rest = [n for n in nodes if n is not first]
        ctrl = await wait_for(lambda: active(rest), what="a new controller")
        await create_topic(admin, "c", [[ctrl.broker_id, *(n.broker_id for n in rest if n is not ctrl)]])
        await wait_for(lambda: _has(admin, "c", 1), what="topic c")
        for _ in range(3):  # let the last outcomes come back
            await ctrl.loop.wait_idle()
            await asyncio.sleep(0.3)
        await ctrl.loop.wait_idle()
        ctrl.loop.journal.sync_blocking()
        live_state = ctrl.loop.state
        zk_states = {}
        for topic in ("a", "b", "c"):
            zk_states.update(await partition_states(admin, topic))
    finally:
        for n in nodes:
            if not n._stopping:
                await n.close()
        await admin.close()

    result = local.replay(tmp_path)
    assert [f for f in result.findings if f["severity"] == "violation"] == []
    name = f"node-{ctrl.broker_id}"
    # a clean stop journals the controller's resignation: the whole journal replays to the state
    # the loop ended with, and the journal cut before that resignation to the one it held
    assert result.states[name] == ctrl.loop.state and not ctrl.loop.state.active
    cut_root = tmp_path / "cut"
    for n in nodes:
        copy_tree(tmp_path / f"node-{n.broker_id}", cut_root / f"node-{n.broker_id}")
    cut_at_clean_stop(cut_root / name)
    cut = local.replay(cut_root)
    assert [f for f in cut.findings if f["severity"] == "violation"] == []
    assert cut.states[name] == live_state
    # the timeline's last accepted value of each partition (znode order) is what ZooKeeper holds
    latest = {}
    for r in result.tables["partition_timeline"]:
        key = (r["topic"], r["partition"])
        if r["kind"] != "deleted" and (key not in latest or r["zk_version"] >= latest[key]["zk_version"]):
            latest[key] = r
    assert len(zk_states) == 6
    for tp, li in zk_states.items():
        row = latest[(tp.topic, tp.partition)]
        assert (row["leader"], row["leader_epoch"], row["isr"], row["zk_version"]) == \
            (li.leader, li.leader_epoch, list(li.isr), li.zk_version), tp
        assert cut.states[name].partitions[tp].leader_isr.leader == li.leader
    terms = result.tables["controller_terms"]
    assert [t["epoch"] for t in terms] == [1, 2]
    assert terms[0]["controller_id"] == first.broker_id and terms[1]["controller_id"] == ctrl.broker_id
    assert [t["reason"] for t in terms] == ["ControllerResigned: the node is stopping"] * 2


async def _has(admin, topic, n):
    return len(await partition_states(admin, topic)) == n
