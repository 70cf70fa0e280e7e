"""The controller's senders encode large LeaderAndIsr / UpdateMetadata bodies in a worker thread
(OffLoop) and small ones on the loop; either way the broker receives the same body."""
from __future__ import annotations

import asyncio
import socket

from adapters.control import requests as Q
from adapters.control.framing import Frame
from adapters.control.transport import ControlServer
from adapters.controller import senders as S
from controller_core import commands as C
from controller_core.values import BrokerInfo, PartitionView, TopicPartition


def _views(n: int) -> tuple:
    return tuple(PartitionView(TopicPartition(f"t{i // 100}", i % 100), 1, 3, (1, 2), 2, 4, (1, 2, 3))
                 for i in range(n))


async def test_large_and_small_requests_reach_the_broker_with_the_same_bodies():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    got: list[Frame] = []

    async def handler(frame: Frame) -> dict:
        got.append(frame)
        return {}

    broker = BrokerInfo(2, "127.0.0.1", port, 10)
    big, small = _views(S.OFF_LOOP_PARTITIONS + 1), _views(3)
    commands = [C.SendLeaderAndIsr(broker_id=2, broker_epoch=10, controller_epoch=2, partitions=big, live_leaders=(broker,)),
                C.SendUpdateMetadata(broker_id=2, broker_epoch=10, controller_epoch=2, partitions=big, live_brokers=(broker,)),
                C.SendLeaderAndIsr(broker_id=2, broker_epoch=10, controller_epoch=2, partitions=small, live_leaders=(broker,))]
    senders = S.Senders(1, put_event=lambda e: None)
    async with ControlServer("127.0.0.1", port, handler):
        senders.sync_brokers({2: broker})
        queue = senders.queues[2][1]
        senders.send(commands)
        assert [type(item.body).__name__ for item in queue._items] == ["OffLoop", "OffLoop", "function"]
        for _ in range(200):
            if len(got) == 3:
                break
            await asyncio.sleep(0.05)
        senders.stop_all()
    assert [f.api for f in got] == [Q.LEADER_AND_ISR, Q.UPDATE_METADATA, Q.LEADER_AND_ISR]
    assert Q.decode_views(got[0].body["partition_states"]) == big  # encoded in a thread
    assert Q.decode_views(got[1].body["partition_states"]) == big
    assert Q.decode_views(got[2].body["partition_states"]) == small  # encoded on the loop
    assert got[0].body["controller_id"] == got[2].body["controller_id"] == 1
