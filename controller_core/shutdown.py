"""Controlled shutdown (Kafka's doControlledShutdown), on a Draft.

The broker is marked shutting down; partitions it leads get a new leader chosen among the other
in-sync replicas (it leaves their ISR), partitions it follows are stopped on it and it leaves
their ISR. The answer lists the replicated partitions it still leads once the writes landed; the
broker retries until that list is empty.

The walk below is the specification; `columnar_shutdown` makes the same decision over the
partition image's columns when the cluster allows it (the common case), and hands back to the
walk untouched otherwise.
"""
from __future__ import annotations

from . import columnar_shutdown
from . import commands as C
from . import partitions as P
from . import replicas as R
from .draft import Draft
from .machines import ReplicaState


def on_controlled_shutdown(d: Draft, request_id: int, broker_id: int, broker_epoch: int) -> None:
    broker = d.brokers.get(broker_id)
    if broker is None:
        d.command(C.ReplyControlledShutdown(request_id=request_id, broker_id=broker_id,
                                            error=f"BROKER_NOT_AVAILABLE: broker {broker_id} is not registered"))
        return
    if broker_epoch >= 0 and broker_epoch < broker.epoch:
        d.reject("controlled shutdown", f"broker {broker_id}: stale broker epoch {broker_epoch} < {broker.epoch}")
        d.command(C.ReplyControlledShutdown(request_id=request_id, broker_id=broker_id,
                                            error=f"STALE_BROKER_EPOCH: {broker_epoch} < {broker.epoch}"))
        return
    if broker_id not in d.shutting_down:
        d.set_shutting_down(d.shutting_down | {broker_id})
    if not columnar_shutdown.on_controlled_shutdown(d, broker_id):
        _move_away(d, broker_id)
    d.requests.shutdown_replies.append((request_id, broker_id))


def _move_away(d: Draft, broker_id: int) -> None:
    """Leadership of the replicated partitions the broker leads moves to another in-sync replica;
    its follower replicas are stopped and go Offline (leaving the ISR)."""
    led, followed = [], []
    for tp, info in d.scan():
        a = info.assignment.replicas
        li = info.leader_isr
        if broker_id in a and len(a) > 1 and li is not None and not d.queued_for_deletion(tp.topic):
            (led if li.leader == broker_id else followed).append(tp)
    led.sort()
    followed.sort()
    P.to_online(d, led, P.CONTROLLED_SHUTDOWN)
    for tp in followed:
        d.requests.send_stop_replica(broker_id, tp, delete=False)
    R.move(d, [(tp, broker_id) for tp in followed], ReplicaState.OFFLINE)
