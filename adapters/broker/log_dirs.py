"""A broker's log directories (JBOD), as Kafka 2.4's LogManager and LogDirFailureChannel use them.

`kctl node --log-dirs D1,D2` (or `log.dirs` in its properties file). Every replica the broker
hosts is a directory `<log dir>/<topic>-<partition>/`, created when the replica first arrives,
in the online log dir holding the fewest replicas, and removed when the replica is deleted
(StopReplica with delete). Existing replica directories are found again at start.

A log dir that can no longer be written (deleted, replaced by a file, unwritable) is found by
a probe every `PROBE_INTERVAL_S` (so within 2 s) and goes offline for good (Kafka: until the
broker restarts): its replicas stop, `on_failure(dir, replicas)` is called (the node writes
`/log_dir_event_notification/log_dir_event_<seq>` `{"version":1,"broker":B,"event":1}`), and
every later LeaderAndIsr for those replicas is answered KAFKA_STORAGE_ERROR. When no log dir is
left, `on_all_failed()` is called: the node exits non-zero, as Kafka halts.

`LogDirReplicaManager` wraps any replica manager (the simulated one, or an embedder's) with
this; an embedder's manager may also raise `KafkaStorageError` itself, with the same effect.
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
from pathlib import Path
from typing import Callable

from controller_core.values import PartitionView, TopicPartition

from adapters.broker.replica_manager import KafkaStorageError

log = logging.getLogger("kctl.log_dirs")

PROBE_INTERVAL_S = 0.5
PROBE_NAME = ".kctl-probe"


def replica_dir_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def _parse_replica_dir(name: str) -> TopicPartition | None:
    topic, sep, p = name.rpartition("-")
    if not sep or not topic or not p.isdigit():
        return None
    return TopicPartition(topic, int(p))


class LogDirs:
    """Placement and health of one broker's log dirs."""

    def __init__(self, dirs: list[str], on_failure: Callable[[str, list[TopicPartition]], None] | None = None,
                 on_all_failed: Callable[[], None] | None = None):
        if not dirs:
            raise ValueError("at least one log dir is needed")
        self.dirs = [str(Path(d).absolute()) for d in dirs]
        self.online: list[str] = []
        self.offline: list[str] = []
        self.placed: dict[TopicPartition, str] = {}
        self.on_failure = on_failure
        self.on_all_failed = on_all_failed

    def open(self) -> None:
        """Create the dirs; find the replicas already in them. A dir that cannot be created or
        written is offline from the start; none usable is an OSError."""
        problems = []
        for d in self.dirs:
            try:
                Path(d).mkdir(parents=True, exist_ok=True)
                self._probe(d)
            except OSError as exc:
                problems.append(f"{d}: {exc.strerror or exc}")
                self.offline.append(d)
                continue
            self.online.append(d)
            for entry in sorted(os.listdir(d)):
                tp = _parse_replica_dir(entry)
                if tp is not None and os.path.isdir(os.path.join(d, entry)):
                    self.placed.setdefault(tp, d)
        if not self.online:
            raise OSError(f"no usable log dir ({'; '.join(problems)})")
        for p in problems:
            log.error("log dir offline at start: %s", p)

    def is_offline(self, tp: TopicPartition) -> bool:
        d = self.placed.get(tp)
        return d is not None and d in self.offline

    def place(self, tp: TopicPartition) -> str:
        """The replica's directory, created if new (in the online dir with the fewest)."""
        d = self.placed.get(tp)
        if d is not None:
            if d in self.offline:
                raise KafkaStorageError(f"{tp} is in the offline log dir {d}")
            return d
        if not self.online:
            raise KafkaStorageError("no online log dir")
        counts = {x: 0 for x in self.online}
        for x in self.placed.values():
            if x in counts:
                counts[x] += 1
        d = min(self.online, key=lambda x: (counts[x], self.online.index(x)))
        try:
            # mkdir, not makedirs: a log dir that vanished (deleted, unmounted) must fail here,
            # not be created again empty under the replicas it held (the chaos soak saw that:
            # a new replica placed in the deleted dir recreated it before the next probe, and
            # the failure went unnoticed)
            os.mkdir(os.path.join(d, replica_dir_name(tp)))
        except FileExistsError:
            pass
        except OSError as exc:
            self.fail(d, f"creating {replica_dir_name(tp)}: {exc.strerror or exc}")
            raise KafkaStorageError(f"{tp}: log dir {d} failed") from None
        self.placed[tp] = d
        return d

    def remove(self, tp: TopicPartition) -> None:
        d = self.placed.pop(tp, None)
        if d is not None and d in self.online:
            shutil.rmtree(os.path.join(d, replica_dir_name(tp)), ignore_errors=True)

    def replicas_in(self, d: str) -> list[TopicPartition]:
        return sorted(tp for tp, x in self.placed.items() if x == d)

    # -- failure detection -----------------------------------------------------------------------

    @staticmethod
    def _probe(d: str) -> None:
        path = os.path.join(d, PROBE_NAME)
        with open(path, "wb") as f:
            f.write(b"ok")
        os.unlink(path)

    def probe_all(self) -> list[tuple[str, str]]:
        """Probe every online dir once (blocking file I/O: run it off the event loop);
        returns the failed ones with the reason."""
        failed = []
        for d in list(self.online):
            try:
                if not os.path.isdir(d):
                    raise OSError("not a directory any more")
                self._probe(d)
            except OSError as exc:
                failed.append((d, str(exc.strerror or exc)))
        return failed

    def check(self) -> None:
        """Probe every online dir once; a failed one goes offline."""
        for d, reason in self.probe_all():
            self.fail(d, reason)

    def fail(self, d: str, reason: str) -> None:
        if d not in self.online:
            return
        self.online.remove(d)
        self.offline.append(d)
        replicas = self.replicas_in(d)
        log.error("log dir %s is offline (%s): %d replica(s) in it stop", d, reason, len(replicas))
        if self.on_failure is not None:
            self.on_failure(d, replicas)
        if not self.online and self.on_all_failed is not None:
            self.on_all_failed()

    async def watch(self) -> None:
        """Probe until cancelled."""
        while self.online:
            await asyncio.sleep(PROBE_INTERVAL_S)
            for d, reason in await asyncio.to_thread(self.probe_all):
                self.fail(d, reason)  # on the event loop: the callbacks start tasks


class LogDirReplicaManager:
    """A replica manager whose replicas live in log dirs; delegates everything else."""

    def __init__(self, inner, dirs: LogDirs):
        self.inner = inner
        self.dirs = dirs

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def is_offline(self, tp: TopicPartition) -> bool:
        return self.dirs.is_offline(tp)

    def become_leader(self, view: PartitionView) -> None:
        self.dirs.place(view.tp)
        self.inner.become_leader(view)

    def become_follower(self, view: PartitionView) -> None:
        self.dirs.place(view.tp)
        self.inner.become_follower(view)

    def stop_replica(self, tp: TopicPartition, delete: bool) -> None:
        self.inner.stop_replica(tp, delete)
        if delete:
            self.dirs.remove(tp)

    def stop_failed(self, replicas: list[TopicPartition]) -> None:
        """The replicas of a failed dir stop (kept, as Kafka keeps them until restart)."""
        for tp in replicas:
            try:
                self.inner.stop_replica(tp, False)
            except Exception:  # noqa: BLE001 - the dir is gone; stopping is best effort
                log.exception("stopping %s after its log dir failed", tp)
