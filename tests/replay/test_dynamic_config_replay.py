"""The cluster default `unclean.leader.election.enable` is journaled by every node (controller or
not) as BrokerDefaultConfigChanged and replays to the live state, across a controller failover."""
from __future__ import annotations

import asyncio
import json

from adapters.znodes import dynconfig
from adapters.sim.cluster import wait_for
from adapters.zookeeper.session import ZkSession
from replay import local
from tests.adapters.test_node import active, create_topic, start_nodes
from tests.replay.helpers import records


async def test_the_dynamic_default_is_journaled_by_every_node_and_replays(zk_connect, tmp_path):
    admin = await ZkSession.connect(zk_connect)
    nodes = await start_nodes(zk_connect, tmp_path, ids=(1, 2, 3))
    try:
        first = await wait_for(lambda: active(nodes), what="a controller")
        await create_topic(admin, "a", [[1, 2], [2, 3]])
        await dynconfig.change_config(admin, "brokers", "<default>", {"unclean.leader.election.enable": "true"})
        await wait_for(lambda: _all_have(nodes, True), what="every node applied the default")
        await first.close()
        rest = [n for n in nodes if n is not first]
        ctrl = await wait_for(lambda: active(rest), what="a new controller")
        assert ctrl.loop.state.config.unclean_default() is True  # the node's setting outlives the term
        await dynconfig.change_config(admin, "brokers", "<default>", delete=["unclean.leader.election.enable"])
        await wait_for(lambda: _all_have(rest, None), what="every live node dropped the default")
        for _ in range(3):
            await ctrl.loop.wait_idle()
            await asyncio.sleep(0.3)
        await ctrl.loop.wait_idle()
        for n in rest:
            n.loop.journal.sync_blocking()
    finally:
        for n in nodes:
            if not n._stopping:
                await n.close()
        await admin.close()
    # (as the loops ended: a clean stop journals the controller's resignation, which keeps the
    # node's configuration)
    live_states = {f"node-{n.broker_id}": n.loop.state for n in rest}
    assert all(s.config.dynamic_unclean_leader_election_enable is None for s in live_states.values())

    for n in nodes:
        seen = [json.dumps(r, sort_keys=True) for _, _, r in records(tmp_path / f"node-{n.broker_id}")
                if "BrokerDefaultConfigChanged" in json.dumps(r)]
        assert any('"unclean_leader_election_enable": true' in line for line in seen), (n.broker_id, seen)
    result = local.replay(tmp_path)
    assert [f for f in result.findings if f["severity"] == "violation"] == []
    for name, state in live_states.items():
        assert result.states[name] == state, name


async def _all_have(nodes, value):
    return all(n.loop.state.config.dynamic_unclean_leader_election_enable is value for n in nodes)
