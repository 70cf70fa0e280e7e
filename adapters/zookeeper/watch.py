"""ZooKeeper for kctl, the watches: `Watch` (what `ZkSession.watch_data` and `watch_children`
return) and `Subscription` (what `ZkSession.on_session_change` returns).

Watches are level-triggered (`Watch`): every firing re-reads the path with a new watch set by
that read and hands the current value to the callback. ZooKeeper keeps watches per connection,
so after any reconnect, same session or new, every watched path is simply re-read (aiozk's
SetWatches replay is switched off): a change made while we were away shows up in that read.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Protocol

from aiozk import protocol as _proto

from adapters.zookeeper.values import ConnectionLost, NoNode, SessionClosed, SessionExpired, ZkError
from adapters.zookeeper.wire import _EXISTS, _GET_CHILDREN2, _GET_DATA

log = logging.getLogger("adapters.zookeeper.session")  # the ZooKeeper client logs under one name: adapters/zookeeper/session.py's


class WatchedSession(Protocol):
    """What a `Watch` uses of the `ZkSession` that made it (session.py implements it): absolute
    paths, reads that set a watch, aiozk's callback registry, and the session's set of live
    watches (re-armed on reconnection). Named here so that this module does not import session.py,
    which imports it."""

    _session: Any
    _watches: set

    def _abs(self, path: str) -> str: ...

    async def _read(self, opcode: int, path: str, watch: bool = False) -> Any: ...


class Watch:
    """A level-triggered watch: each time ZooKeeper fires (or the session reconnects), the path
    is re-read with a new watch set by that same read, and `callback(current value)` is called.
    A change during a read either shows in the read or fires the new watch: never lost.

    Callbacks run on the event loop and must not block (enqueue and return)."""

    _DATA_EVENTS = (_proto.WatchEvent.CREATED, _proto.WatchEvent.DELETED, _proto.WatchEvent.DATA_CHANGED)
    _CHILD_EVENTS = (_proto.WatchEvent.CREATED, _proto.WatchEvent.DELETED, _proto.WatchEvent.CHILDREN_CHANGED)

    def __init__(self, zk: WatchedSession, path: str, kind: str, callback: Callable[[Any], None]):
        self.path = path
        self.kind = kind
        self._zk = zk
        self._full_path = zk._abs(path)
        self._callback = callback
        self._events = self._DATA_EVENTS if kind == "data" else self._CHILD_EVENTS
        self._dirty = True
        self._wakeup: asyncio.Future | None = None
        self._first: asyncio.Future = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task | None = None
        self.cancelled = False
        self.deliveries = 0

    async def _start(self) -> "Watch":
        for event_type in self._events:
            self._zk._session.add_watch_callback(event_type, self._full_path, self._trigger)
        self._task = asyncio.create_task(self._run(), name=f"zk-watch-{self.kind}:{self.path}")
        await asyncio.shield(self._first)
        return self

    def _trigger(self, _path: str | None = None) -> None:
        self._dirty = True
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.cancelled:
            while not self._dirty:
                self._wakeup = loop.create_future()
                await self._wakeup
            self._dirty = False
            try:
                value = await (self._read_data() if self.kind == "data" else self._read_children())
            except (SessionClosed, asyncio.CancelledError):
                return
            except (ConnectionLost, SessionExpired):
                self._dirty = True
                continue
            except ZkError as error:
                log.warning("watch on %s: %r; retrying in 1s", self.path, error)
                self._dirty = True
                await asyncio.sleep(1.0)
                continue
            if self.cancelled:
                return
            self.deliveries += 1
            try:
                self._callback(value)
            except Exception:
                log.exception("watch callback for %s failed", self.path)
            if not self._first.done():
                self._first.set_result(None)

    async def _read_data(self):
        zk = self._zk
        while True:
            try:
                return await zk._read(_GET_DATA, self.path, watch=True)
            except NoNode:
                pass
            try:
                await zk._read(_EXISTS, self.path, watch=True)
            except NoNode:
                return None  # the exists watch fires on creation

    async def _read_children(self):
        zk = self._zk
        while True:
            try:
                names, _ = await zk._read(_GET_CHILDREN2, self.path, watch=True)
                return sorted(names)
            except NoNode:
                pass
            try:
                await zk._read(_EXISTS, self.path, watch=True)
            except NoNode:
                return None

    def cancel(self) -> None:
        if self.cancelled:
            return
        self.cancelled = True
        for event_type in self._events:
            callbacks = self._zk._session.watch_callbacks.get((event_type, self._full_path))
            if callbacks and self._trigger in callbacks:
                self._zk._session.remove_watch_callback(event_type, self._full_path, self._trigger)
        self._zk._watches.discard(self)
        # let go of the task: once cancelled it holds its CancelledError, whose traceback holds
        # the frame of `_run`, so this watch; held here too, that was a reference cycle per
        # cancelled watch, with the callback's owner hanging off it (issue 16)
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
        if not self._first.done():
            self._first.cancel()


class Subscription:
    """Returned by `on_session_change`; `cancel()` stops the callbacks."""

    def __init__(self, registry: list, callback):
        self._registry = registry
        self.callback = callback

    def cancel(self) -> None:
        if self in self._registry:
            self._registry.remove(self)


class Serial:
    """Runs `refresh()` after each `poke()`, one run at a time; pokes during a run coalesce
    into one more run. `first` resolves after the first complete run."""

    def __init__(self, refresh: Callable, name: str):
        self.refresh = refresh
        self.name = name
        self.dirty = False
        self.task: asyncio.Task | None = None
        self.first: asyncio.Future = asyncio.get_running_loop().create_future()

    def poke(self) -> None:
        self.dirty = True
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._run(), name=f"refresh-{self.name}")

    async def _run(self) -> None:
        while self.dirty:
            self.dirty = False
            try:
                await self.refresh()
            except ZkError as exc:
                log.warning("refreshing %s failed (%s); retrying", self.name, exc)
                await asyncio.sleep(0.2)
                self.dirty = True
                continue
            except Exception as exc:  # noqa: BLE001 - a bug here must not silence the watch for good
                # Retrying would fail the same way on the same data; the next change retries.
                # Still resolve `first`, or a failover would wait forever for this watch.
                log.error("refreshing %s failed: %r; waiting for the next change", self.name, exc,
                          exc_info=exc)
            if not self.first.done():
                self.first.set_result(None)

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()
        if not self.first.done():
            self.first.cancel()  # a failover still waiting for it stops (CancelledError)


class ChildrenFollower:
    """A znode's children, followed: `start()` creates the parent if needed and watches it; each
    change sets `names` (the children `keep` accepts, in ZooKeeper's order) and runs
    `refresh()` through a `Serial`, so changes arriving during a refresh coalesce into one more.
    `poke()` runs it again without a change; `first` resolves after the first complete run.
    The notification queues Kafka reads this way (/config/changes, /log_dir_event_notification)
    keep their own decoding in `refresh`."""

    def __init__(self, zk, path: str, refresh: Callable, name: str,
                 keep: Callable[[str], bool] = lambda name: True):
        self.zk = zk
        self.path = path
        self.keep = keep
        self.names: list[str] = []
        self._refresh = refresh
        self._name = name
        self._watch = None
        self._serial: Serial | None = None

    async def start(self) -> None:
        await self.zk.ensure_path(self.path)
        self._serial = Serial(self._refresh, self._name)
        self._watch = await self.zk.watch_children(self.path, self._on_names)

    @property
    def first(self) -> asyncio.Future:
        return self._serial.first

    def poke(self) -> None:
        self._serial.poke()

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._serial is not None:
            self._serial.cancel()

    def _on_names(self, names) -> None:
        self.names = [n for n in names or () if self.keep(n)]
        self._serial.poke()
