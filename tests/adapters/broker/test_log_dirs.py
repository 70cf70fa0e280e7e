"""A broker's log dirs (adapters/broker/log_dirs.py): a dir that vanished fails, it is never
created again under the replicas it held."""
from __future__ import annotations

import os
import shutil

import pytest

from adapters.broker.log_dirs import LogDirs
from adapters.broker.replica_manager import KafkaStorageError
from controller_core.values import TopicPartition


def test_a_deleted_log_dir_fails_at_the_next_placement_instead_of_coming_back_empty(tmp_path):
    """Found by the chaos soak: a replica placed in a deleted dir recreated it (makedirs) before
    the next probe, so the failure of the replicas it held went unnoticed."""
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    failures = []
    dirs = LogDirs([d1, d2], on_failure=lambda d, replicas: failures.append((d, replicas)))
    dirs.open()
    t0, t1, t2 = (TopicPartition("t", p) for p in range(3))
    assert (dirs.place(t0), dirs.place(t1)) == (d1, d2)
    shutil.rmtree(d1)
    with pytest.raises(KafkaStorageError):
        dirs.place(t2)  # the emptiest online dir is d1, which is gone
    assert not os.path.exists(d1)
    assert failures == [(d1, [t0])] and dirs.offline == [d1]
    assert dirs.place(t2) == d2 and dirs.is_offline(t0) and not dirs.is_offline(t1)
    assert dirs.place(t1) == d2  # an existing replica's dir is reused as before
