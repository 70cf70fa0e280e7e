"""`kctl replay --follow` as a real process: it audits segments as they close, prints each new
finding as it appears, and stops on a real SIGINT (sent to its process group, as Ctrl-C is)
with the checkpoint saved; exit 0 when the verdict passes, 1 on a violation."""
from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from adapters.journal.format import list_segments

from .helpers import ROOT, flip_byte, generate_subprocess

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1800)]


class Follower:
    """A `kctl replay --follow` process and its output lines, read on a thread."""

    def __init__(self, journal, out):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "adapters.cli", "replay", "--journal", str(journal), "--out", str(out), "--follow",
             "--poll-seconds", "0.5", "--master", "local[2]"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, prefix: str, timeout: float = 900) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None or time.monotonic() > deadline:
                raise AssertionError(f"no line starting {prefix!r}; output so far:\n" + "\n".join(self.seen))
            self.seen.append(line)
            if line.startswith(prefix):
                return line

    def interrupt(self, timeout: float = 600) -> int:
        os.killpg(self.proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        code = self.proc.wait(timeout=timeout)
        for line in iter(self.lines.get, None):
            self.seen.append(line)
        return code

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def journals(tmp_path):
    """A generated life, and a journal directory holding only its first three segments per node
    (the rest arrive while --follow runs)."""
    full = tmp_path / "full"
    generate_subprocess(full, events=1500, partitions=80, seed=3, segment_bytes=30_000)
    live = tmp_path / "live"
    later = []
    for node in sorted(p for p in full.iterdir() if p.is_dir()):
        (live / node.name).mkdir(parents=True)
        segs = list_segments(node)
        assert len(segs) >= 5, f"too few segments for the test: {node}"
        for k, seg in enumerate(segs):
            if k < 3:
                shutil.copy(seg.path, live / node.name / seg.path.name)
            else:
                later.append((seg.path, live / node.name / seg.path.name))
    return live, later


def test_follow_audits_closed_segments_prints_new_findings_and_stops_on_sigint(journals, tmp_path):
    live, later = journals
    out = tmp_path / "out"
    first = Follower(live, out)
    try:
        line = first.wait_for("audited ")
        assert line.startswith("audited 6 closed segment(s)") and line.endswith("PASS"), line
        assert first.interrupt() == 0
    finally:
        first.kill()
    assert any(line.startswith("stopped after 1 pass(es); checkpoint saved") for line in first.seen), first.seen
    manifest = json.loads((out / "_checkpoint" / "manifest.json").read_text())
    assert len(manifest["segments"]) == 6  # each node's first two segments: the third is still open

    second = Follower(live, out)
    try:
        second.wait_for("following ")
        # the journals grow; one of the new segments has a damaged line (it closes once the
        # segment after it exists); each file arrives whole, by a rename
        damaged = later[0][1]
        staging = tmp_path / "staging"
        staging.mkdir()
        for k, (src, dst) in enumerate(later):
            shutil.copy(src, staging / f"{k}-{dst.name}")
        flip_byte(staging / f"0-{damaged.name}", line=3)
        for k, (src, dst) in enumerate(later):
            os.replace(staging / f"{k}-{dst.name}", dst)
        found = second.wait_for("  violation corrupt-record: ")
        assert f"{damaged.parent.name}/{damaged.name}:3" in found, found
        line = second.wait_for("audited ")
        assert line.endswith("FAIL (violations found)"), line
        assert second.interrupt() == 1
    finally:
        second.kill()
    manifest = json.loads((out / "_checkpoint" / "manifest.json").read_text())
    closed = sum(len(list_segments(node)) - 1 for node in live.iterdir())
    assert len(manifest["segments"]) == closed
    assert manifest["runs"][-1]["passed"] is False
    # the second process did not re-execute what the first had audited for good: the units of
    # each node's first segment (those of the second ran "to the end of the journal" then)
    first, second_first = manifest["runs"][0], manifest["runs"][1]
    assert first["units"] == first["units_executed"] == 6
    assert second_first["units"] - second_first["units_executed"] >= 3
