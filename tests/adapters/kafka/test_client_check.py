"""The soak's `kafka-client` check: a stock client (confluent-kafka) through a real broker's Kafka
listener, compared with a ZooKeeper view; it passes on equal metadata and names each difference."""
from __future__ import annotations

import pytest

from adapters.control import requests as Q
from adapters.broker.broker import Broker
from adapters.control.transport import ControlClient, ControlServer
from adapters.sim.chaos.checks import check_kafka_client
from adapters.kafka.apis import BrokerServices, KafkaApis
from adapters.kafka.listener import serve
from controller_core import commands as C
from controller_core.values import LeaderIsr, PartitionView

from tests.adapters.sim.test_chaos_checks import T0, T1, view

pytest.importorskip("confluent_kafka")


@pytest.fixture
async def broker_at():
    broker = Broker(1, None)

    async def not_here(frame):
        return {"error": "NOT_CONTROLLER"}

    apis = KafkaApis(BrokerServices(broker_id=1, broker=broker, zk=lambda: None, is_controller=lambda: False,
                                    controller_request=not_here))
    server = ControlServer("127.0.0.1", 0, broker.handle,
                           foreign=lambda r, w, first, peer: serve(apis, r, w, first, peer))
    await server.start()
    yield broker, server.port
    await server.close()


async def update_metadata(port, zk_view, controller_id=1):
    c = C.SendUpdateMetadata(
        broker_id=1, broker_epoch=-1, controller_epoch=zk_view.controller_epoch,
        partitions=tuple(PartitionView(tp, li.leader, li.leader_epoch, li.isr, li.controller_epoch, li.zk_version,
                                       zk_view.assignments[tp.topic][tp.partition].replicas)
                         for tp, li in zk_view.states.items()),
        live_brokers=tuple(zk_view.brokers.values()))
    async with ControlClient("127.0.0.1", port) as client:
        assert await client.request(Q.UPDATE_METADATA, Q.update_metadata_body(c, controller_id)) == {}


async def test_a_stock_client_sees_what_zookeeper_says_and_differences_are_named(broker_at):
    broker, port = broker_at
    zk_view = view(brokers=(1,), ports={1: port}, states={T0: LeaderIsr(1, 3, (1,), 4, 5),
                                                           T1: LeaderIsr(1, 0, (1,), 4, 1)})
    await update_metadata(port, zk_view)
    result = await check_kafka_client(zk_view, 1)
    assert result.ok, result.problems
    # ZooKeeper moved on (an ISR change) and names another controller: two differences
    moved = view(brokers=(1,), ports={1: port}, states={T0: LeaderIsr(1, 3, (1,), 4, 5),
                                                        T1: LeaderIsr(1, 1, (1, 3), 4, 2)})
    result = await check_kafka_client(moved, 2)
    assert not result.ok and result.count == 2
    assert result.problems == ("controller 1 for the client, 2 in ZooKeeper",
                               "t-1: leader 1 replicas [2, 3, 1] isr [1] for the client, "
                               "leader 1 replicas [2, 3, 1] isr [1, 3] in ZooKeeper")
