"""The README's "Embedding a node in a service" example, run exactly as a user copies it: the
block is taken from README.md, written to a file and run by a fresh interpreter against the test
session's ZooKeeper (through $KCTL_ZOOKEEPER, which the example reads as kctl does), with
$TMPDIR pointed at an empty directory to see that it writes only there and leaves nothing."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from adapters.znodes import paths as zkpaths
from adapters.zookeeper.session import ZkSession

README = Path(__file__).resolve().parents[2] / "README.md"


def example() -> str:
    text = README.read_text()
    section = text[text.index("## Embedding a node in a service"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


async def test_the_readme_example_runs_as_written_and_cleans_up(zk_connect, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(example())
    temp = tmp_path / "temp"
    temp.mkdir()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "KCTL_ZOOKEEPER": zk_connect, "TMPDIR": str(temp)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "broker 1 leads orders-0 (leader epoch 0)\n"
    for trouble in ("Traceback", "Error", "Task was destroyed", "Repair loop", "not in \"closing\" state"):
        assert trouble not in done.stderr, done.stderr
    assert list(temp.iterdir()) == []  # the journal went to a temporary directory, removed
    async with await ZkSession.connect(zk_connect) as zk:
        assert await zk.get_children(zkpaths.BROKERS_IDS) == []  # the node closed its session
        assert await zk.exists(zkpaths.CONTROLLER) is None
        assert await zk.exists(zkpaths.topic("orders")) is not None


def test_the_embedding_examples_old_import_paths_still_work_for_one_release():
    # README's example imported these before the layout moved them; the old paths are
    # aliases of the new ones until the next release.
    from adapters.broker.replica_manager import ReplicaManagerBase
    from adapters.replica_manager import ReplicaManagerBase as old_base
    from adapters.zk import ZkSession as old_session
    from adapters.zookeeper.session import ZkSession

    assert old_base is ReplicaManagerBase and old_session is ZkSession
