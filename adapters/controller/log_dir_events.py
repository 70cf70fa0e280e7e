"""`/log_dir_event_notification`: brokers report failed log dirs, the controller reads and deletes.

Broker side: `notify(zk, broker_id)` writes `log_dir_event_<seq>` `{"version":1,"broker":B,"event":1}`
(Kafka's LogDirEventNotificationHandler.LogDirFailureEvent = 1).

Controller side: `LogDirEventWatch` follows the children; while its node is the controller it
reads every notification, emits one `LogDirEventNotified` with their brokers, then deletes them
(Kafka reads then deletes). When a node becomes the controller it deletes the notifications
already there without acting on them, as Kafka's `onControllerFailover` does: the failover sends
every broker LeaderAndIsr for all its partitions anyway, which they answer with storage errors.
"""
from __future__ import annotations

import json
import logging
from typing import Callable

from controller_core import events as E

from adapters.controller.watches import delete_consumed
from adapters.zookeeper.watch import ChildrenFollower
from adapters.zookeeper.session import ZkSession

log = logging.getLogger("kctl.log_dirs")

LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1


def encode(broker_id: int) -> bytes:
    return json.dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT},
                      separators=(",", ":")).encode()


def decode(data: bytes | None) -> int:
    """The broker of a notification; ValueError if it is not one."""
    try:
        doc = json.loads(data or b"")
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != 1 or type(doc.get("broker")) is not int \
            or doc["broker"] < 0:
        raise ValueError('expected {"version":1,"broker":<id>,"event":1}')
    return doc["broker"]


async def notify(zk: ZkSession, broker_id: int) -> str:
    return await zk.create(f"{LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}", encode(broker_id),
                           sequential=True, make_parents=True)


class LogDirEventWatch:
    def __init__(self, zk: ZkSession, put_event: Callable, clock: Callable[[], int], is_active: Callable[[], bool],
                 epoch_zk_version: Callable[[], int] = lambda: -1):
        self.zk = zk
        self.epoch_zk_version = epoch_zk_version
        self.put_event = put_event
        self.clock = clock
        self.is_active = is_active
        self.discard = False
        self._children = ChildrenFollower(zk, LOG_DIR_EVENT_NOTIFICATION, self._refresh, "log-dir-events",
                                          keep=lambda name: name.startswith(LOG_DIR_EVENT_PREFIX))

    async def start(self) -> None:
        await self._children.start()

    def stop(self) -> None:
        self._children.stop()

    def became_controller(self) -> None:
        """Delete the notifications there now, without acting on them (see the module doc)."""
        self.discard = True
        self._children.poke()

    async def _refresh(self) -> None:
        if not self.is_active():
            return
        discard, self.discard = self.discard, False
        paths = [f"{LOG_DIR_EVENT_NOTIFICATION}/{n}" for n in sorted(self._children.names)]
        if not paths:
            return
        brokers = []
        for path, value in (await self.zk.get_many(paths)).items():
            if value is None:
                continue
            try:
                brokers.append(decode(value[0]))
            except ValueError as exc:
                log.error("deleting unreadable log dir event %s: %s", path, exc)
        if brokers and not discard and self.is_active():
            self.put_event(E.LogDirEventNotified(at=self.clock(), brokers=tuple(sorted(set(brokers)))))
        for path in paths:
            await delete_consumed(self.zk, path, self.epoch_zk_version())
