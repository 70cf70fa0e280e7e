"""Real `kctl node` processes on a real ZooKeeper: killed with SIGKILL, paused with SIGSTOP."""
from __future__ import annotations

import asyncio
import json

import pytest

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.sim.cluster import controller, live_broker_ids, partition_states, wait_for
from controller_core.values import ReplicaAssignment

SESSION_MS = 2000


async def started(local, admin, ids):
    for i in ids:
        local.start_node(i)
    await wait_for(lambda: _brokers(admin, ids), timeout=60, what=f"brokers {ids} registered")
    holder, epoch = await wait_for(lambda: _controller(admin), timeout=30, what="a controller")
    return holder, epoch


async def _brokers(admin, ids):
    return set(ids) <= set(await live_broker_ids(admin))


async def _controller(admin):
    holder, epoch = await controller(admin)
    return (holder, epoch) if holder is not None else None


async def test_sigkill_of_the_controller_moves_it_and_the_node_rejoins(local, admin):
    holder, epoch = await started(local, admin, (1, 2, 3))
    assert epoch == 1
    await admin.create(zkpaths.topic("t"), zkdata.encode_topic_assignment(
        {0: ReplicaAssignment((holder, *[b for b in (1, 2, 3) if b != holder]))}))
    await wait_for(lambda: partition_states(admin, "t"), what="t-0 created")
    local.kill(holder)
    new_holder, new_epoch = await wait_for(lambda: _moved(admin, holder), timeout=30, what="a new controller")
    assert new_holder != holder and new_epoch == 2
    states = await wait_for(lambda: _led_by_other(admin, holder), timeout=30, what="t-0 re-elected")
    assert states.controller_epoch == 2
    # restarted right away: its previous session's registration is replaced, it joins as a broker
    local.start_node(holder)
    await wait_for(lambda: _brokers(admin, (1, 2, 3)), timeout=30, what="the node rejoins")
    assert (await controller(admin)) == (new_holder, 2)


async def test_controller_paused_past_its_session_writes_nothing_and_resigns(local, admin):
    holder, _ = await started(local, admin, (1, 2, 3))
    await admin.create(zkpaths.topic("t"), zkdata.encode_topic_assignment({0: ReplicaAssignment((1, 2, 3))}))
    await wait_for(lambda: partition_states(admin, "t"), what="t-0 created")
    local.pause(holder)  # a long GC pause: the zombie controller
    new_holder, new_epoch = await wait_for(lambda: _moved(admin, holder), timeout=30, what="a new controller")
    assert new_epoch == 2
    before = await partition_states(admin)
    local.resume(holder)
    log_path = local.nodes[holder].log_path
    await wait_for(lambda: _logged(log_path, "no longer the controller"), timeout=30, what="the zombie resigns")
    await asyncio.sleep(1.0)
    after = await partition_states(admin)
    assert all(li.controller_epoch != 1 or before.get(tp) == li for tp, li in after.items())
    assert (await controller(admin)) == (new_holder, 2)


async def test_sigterm_runs_a_controlled_shutdown_and_exits_0(local, admin):
    holder, _ = await started(local, admin, (1, 2, 3))
    leader = next(b for b in (1, 2, 3) if b != holder)
    await admin.create(zkpaths.topic("t"), zkdata.encode_topic_assignment(
        {0: ReplicaAssignment((leader, holder)), 1: ReplicaAssignment((leader, 6 - leader - holder))}))
    await wait_for(lambda: _isr_full(admin, "t"), timeout=30, what="ISRs complete")
    assert local.stop(leader, timeout=60) == 0
    states = await partition_states(admin, "t")
    assert all(li.leader != leader for li in states.values())
    assert "controlled shutdown of broker" in local.nodes[leader].log_text()


async def _isr_full(admin, topic):
    states = await partition_states(admin, topic)
    return states and all(len(li.isr) == 2 for li in states.values())


async def _moved(admin, old):
    holder, epoch = await controller(admin)
    return (holder, epoch) if holder is not None and holder != old else None


async def _led_by_other(admin, old):
    states = await partition_states(admin, "t")
    li = next(iter(states.values()), None)
    return li if li is not None and li.leader not in (old, -1) else None


async def _logged(path, text):
    try:
        return text in path.read_text(errors="replace")
    except OSError:
        return False
