"""Operator metrics scraped from live nodes on the session's ZooKeeper: the per-broker
RequestRateAndQueueTimeMs and the LogDirChange / UncleanLeaderElectionEnable timers."""
from __future__ import annotations

from adapters.znodes import dynconfig
from adapters.sim.cluster import wait_for
from adapters.node import ClusterNode
from tests.adapters.observability.test_metrics import node_config, scrape, value
from tests.adapters.test_node import active, create_topic


async def test_queue_time_per_broker_and_the_new_controller_state_timers(zk_connect, tmp_path, admin):
    nodes = []
    try:
        for b in (1, 2):
            node = ClusterNode(node_config(zk_connect, tmp_path, b))
            await node.start()
            nodes.append(node)
        ctrl = await wait_for(lambda: active(nodes), what="a controller")
        # first, so that it is not deferred behind the topic's writes (a deferred event is timed
        # with the decision it waited for)
        await dynconfig.change_config(admin, "brokers", "<default>", {"unclean.leader.election.enable": "true"})
        await wait_for(lambda: _applied(ctrl), what="the controller applied the default")
        await create_topic(admin, "q", [[1, 2], [2, 1]])

        async def scraped():
            families = await scrape(ctrl)
            name = "kafka_controller_controllerchannelmanager_requestrateandqueuetimems"
            done = [value(families, name + "_count", broker_id=str(b)) for b in (1, 2)]
            timer = "kafka_controller_controllerstats_uncleanleaderelectionenablerateandtimems_count"
            return families if all(n > 0 for n in done) and value(families, timer) >= 1 else None
        families = await wait_for(scraped, what="queue times for both brokers and the unclean timer")
        assert value(families, "kafka_controller_controllerstats_logdirchangerateandtimems_count") == 0
    finally:
        for n in nodes:
            await n.close()


async def _applied(node):
    return node.loop.state.config.dynamic_unclean_leader_election_enable is True
