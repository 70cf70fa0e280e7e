"""The controller's per-broker send queues (Kafka's ControllerChannelManager).

One `BrokerSendQueue` per live broker, created when the broker appears in the controller's state
and stopped when it leaves it (its pending requests are abandoned, as Kafka does when a broker
is removed). Requests of one decision for one broker go out in Kafka's order (LeaderAndIsr,
UpdateMetadata, StopReplica); an UpdateMetadata shared by every broker is encoded once.
Answers come back to the controller loop as events.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from controller_core import commands as C
from controller_core import events as E
from controller_core.values import BrokerInfo

from adapters.control import requests as Q
from adapters.control.transport import BrokerSendQueue, OffLoop
from adapters.observability.metrics import Window

OFF_LOOP_PARTITIONS = 2000
"""Requests of this many partitions are encoded in a worker thread (`OffLoop`); smaller ones on
the loop, where a thread hand-off would cost more than the encoding."""

log = logging.getLogger("kctl.senders")


class Senders:
    """Owns the send queues; `send()` takes the Send* commands of one decision.

    `put_event` enqueues into the controller loop. `on_ack(broker_id, api, elapsed_ms, tag)`, if
    given, is told of every acknowledged request (benchmarks measure broker round trips)."""

    def __init__(self, controller_id: int, put_event: Callable, *, secret: bytes | None = None,
                 clock=lambda: int(time.time() * 1000), on_ack: Callable | None = None,
                 request_timeout_s: float = 30.0):
        self.controller_id = controller_id
        self.request_timeout_s = request_timeout_s  # Kafka's controller.socket.timeout.ms
        self.put_event = put_event
        self.secret = secret
        self.clock = clock
        self.on_ack = on_ack
        self.queues: dict[int, tuple[BrokerInfo, BrokerSendQueue]] = {}
        self.queue_times: dict[int, object] = {}  # broker -> metrics.Window of queue times (ms)
        self.storage_errors_seen = False  # a broker reported a failed log dir: UpdateMetadata names offline replicas

    def sync_brokers(self, brokers) -> None:
        """Start queues for new brokers, restart those whose address changed, stop the gone."""
        for broker_id in list(self.queues):
            info, queue = self.queues[broker_id]
            current = brokers.get(broker_id)
            if current is None or (current.host, current.port) != (info.host, info.port):
                queue.stop()
                del self.queues[broker_id]
        for broker_id, info in brokers.items():
            if broker_id not in self.queues:
                queue = BrokerSendQueue(broker_id, info.host, info.port, secret=self.secret,
                                        on_response=self._responder(broker_id),
                                        request_timeout=self.request_timeout_s)
                window = self.queue_times.get(broker_id)
                if window is None:

                    window = self.queue_times[broker_id] = Window()
                queue.on_dequeue = window.observe
                queue.start()
                self.queues[broker_id] = (info, queue)

    def stop_all(self) -> None:
        for _, queue in self.queues.values():
            queue.stop()
        self.queues.clear()

    def queue_sizes(self) -> dict[int, int]:
        return {b: q.qsize() for b, (_, q) in self.queues.items()}

    def send(self, commands, offline_replicas: dict | None = None) -> None:
        """Queue the requests of one decision. Bodies are encoded lazily, by each broker's queue
        when the request reaches its head: the first LeaderAndIsr goes on the wire while the
        next is still being encoded, instead of after all of them (a 10,000-partition failover
        has a few MB to encode). The UpdateMetadata states shared by every broker are encoded
        once, by the first queue that needs them."""
        shared_um: dict[int, bytes] = {}
        shared_lock = threading.Lock()  # large bodies are encoded in worker threads (OffLoop)
        controller_id = self.controller_id

        def lazy(c, encode):
            return OffLoop(encode) if len(c.partitions) >= OFF_LOOP_PARTITIONS else encode

        def lai(c):
            return lazy(c, lambda: Q.leader_and_isr_encoded(c, controller_id))

        def um(c):
            def encode():
                with shared_lock:  # the first queue encodes the shared states, the others wait for them
                    states = shared_um.get(id(c.partitions))
                    if states is None:
                        states = shared_um[id(c.partitions)] = Q.states_json(c.partitions)
                offline = offline_replicas.get(id(c.partitions)) if offline_replicas else None
                return Q.update_metadata_encoded(c, controller_id, states, offline)
            return lazy(c, encode)

        for c in commands:
            entry = self.queues.get(c.broker_id)
            if entry is None:
                continue  # the broker left between the decision and now
            queue = entry[1]
            if isinstance(c, C.SendLeaderAndIsr):
                queue.put(Q.LEADER_AND_ISR, lai(c), (Q.LEADER_AND_ISR, len(c.partitions)))
            elif isinstance(c, C.SendUpdateMetadata):
                queue.put(Q.UPDATE_METADATA, um(c), (Q.UPDATE_METADATA, len(c.partitions)))
            elif isinstance(c, C.SendStopReplica):
                queue.put(Q.STOP_REPLICA, Q.stop_replica_body(c, self.controller_id),
                          (Q.STOP_REPLICA, c.delete, c.partitions))

    def _responder(self, broker_id: int):
        def on_response(tag, body: dict, elapsed_ms: float) -> None:
            api = tag[0]
            if self.on_ack is not None:
                self.on_ack(broker_id, api, elapsed_ms, tag)
            if "error" in body and body.get("error"):
                log.warning("broker %d answered %s with %s: %s", broker_id, api, body.get("error"), body.get("message"))
            errors = Q.partition_errors(body)
            if api == Q.LEADER_AND_ISR:
                if errors and any(e.startswith("KAFKA_STORAGE_ERROR") for _, e in errors):
                    self.storage_errors_seen = True
                if errors:
                    self.put_event(E.LeaderAndIsrResponded(at=self.clock(), broker_id=broker_id, errors=errors))
            elif api == Q.STOP_REPLICA:
                _, delete, partitions = tag
                if delete:  # only deletions feed decisions (topic deletion progress)
                    self.put_event(E.StopReplicaResponded(at=self.clock(), broker_id=broker_id, delete=True,
                                                          partitions=partitions, errors=errors))
        return on_response

