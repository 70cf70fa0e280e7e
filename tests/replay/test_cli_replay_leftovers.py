"""`kctl replay` run as a user runs it: the zips it ships to Spark go to a temporary directory
that is gone when the command has exited (a `kctl-replay-*` folder used to stay behind in the
temp directory after every run)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from replay.generate import generate

pytestmark = pytest.mark.spark


@pytest.mark.timeout(900)  # the child gets 600 s: a Spark start and job on a possibly loaded machine
@pytest.mark.slow  # a whole kctl replay in a child process; make test-slow
def test_kctl_replay_leaves_no_folder_in_the_temp_dir(tmp_path):
    journal = tmp_path / "journals"
    generate(journal, events=300, partitions=20, seed=3)
    temp = tmp_path / "temp"
    temp.mkdir()
    done = subprocess.run([sys.executable, "-m", "adapters.cli", "replay", "--journal", str(journal),
                           "--out", str(tmp_path / "out"), "--master", "local[1]"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "TMPDIR": str(temp)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (tmp_path / "out" / "report.html").exists()
    assert sorted(p.name for p in temp.iterdir() if p.name.startswith("kctl-")) == []
