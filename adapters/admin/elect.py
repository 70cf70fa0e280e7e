"""`kafka-leader-election.sh`: preferred and unclean elections, asked of the controller over the
control channel (`controller_request`), as Kafka 2.4's ElectLeaders goes to the controller."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from controller_core.values import TopicPartition

from adapters.admin.cluster_state import read_assignments
from adapters.admin.errors import AdminError, ControllerUnavailable, ToolFailure
from adapters.control import requests as Q
from adapters.control.transport import ControlChannelError, ControlClient
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.zookeeper.session import NoNode, ZkSession


ELECTION_NOT_NEEDED = "ELECTION_NOT_NEEDED"


async def elect_leaders(
    zk: ZkSession,
    election_type: str,
    partitions: Sequence[TopicPartition] | None,
    *,
    secret: bytes | str | None = None,
    timeout: float = 30.0,
) -> list[tuple[TopicPartition, str | None]]:
    """Send ElectLeaders to the controller; [(partition, error or None)] sorted.

    `election_type` is "preferred" or "unclean"; `partitions` None means every partition.
    Named partitions must exist (AdminError otherwise)."""
    election_type = election_type.lower()
    if election_type not in ("preferred", "unclean"):
        raise AdminError(f"unknown election type {election_type!r} (PREFERRED or UNCLEAN)")
    if partitions is not None:
        if not partitions:
            raise AdminError("no partitions to elect leaders for")
        found = await read_assignments(zk, {tp.topic for tp in partitions})
        missing = [str(tp) for tp in partitions if tp.topic not in found or tp.partition not in found[tp.topic][0]]
        if missing:
            raise AdminError(f"Unknown topic partition(s): {', '.join(missing)}")
    body = {"election_type": election_type, "partitions": None if partitions is None else Q.tp_list(partitions)}
    answer = await controller_request(zk, Q.ELECT_LEADERS, body, secret=secret, timeout=timeout)
    if answer.get("error"):
        raise ToolFailure(f"the controller refused the election: {answer['error']}: {answer.get('message', '')}")
    results = []
    for item in answer.get("results") or []:
        if isinstance(item, list) and len(item) == 3:
            results.append((TopicPartition(str(item[0]), int(item[1])), item[2] or None))
    return sorted(results)


async def controller_request(zk: ZkSession, api: str, body: dict, *, secret: bytes | str | None = None,
                             timeout: float = 30.0) -> dict:
    """Send one request to the current controller (found through `/controller` and its broker
    registration), following it when it moves, until `timeout` seconds have passed."""

    deadline = time.monotonic() + timeout
    problem = "no controller is elected"
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ControllerUnavailable(f"no controller answered within {timeout:g} s: {problem}")
        try:
            data, _ = await zk.get(zkpaths.CONTROLLER)
            controller_id = zkdata.decode_controller(data)
            bdata, bstat = await zk.get(zkpaths.broker(controller_id))
            info = zkdata.decode_broker(controller_id, bdata, bstat.czxid)
        except NoNode:
            problem = "no controller is elected"
        except (zkdata.ZnodeFormatError, ValueError) as exc:
            problem = f"cannot read the controller's registration: {exc}"
        else:
            client = ControlClient(info.host, info.port, secret=secret)
            try:
                answer = await client.request(api, body, timeout=max(remaining, 0.1))
            except ControlChannelError as exc:
                problem = f"controller {controller_id} at {info.host}:{info.port}: {exc}"
            else:
                if answer.get("error") != "NOT_CONTROLLER":
                    return answer
                problem = f"broker {controller_id} is no longer the controller"
            finally:
                await client.close()
        await asyncio.sleep(min(0.2, max(deadline - time.monotonic(), 0)))
