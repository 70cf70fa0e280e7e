"""`heap.trim()` gives freed C-heap pages back to the system (glibc's `malloc_trim`)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from adapters.runtime import heap

# In a fresh interpreter: 64 KiB blocks (under glibc's mmap threshold, so on the heap), every
# tenth kept alive so the freed ones sit between live ones and the heap top cannot shrink by
# itself; then the resident set before and after `trim()`.
_FRAGMENTED = """
import os
from adapters.runtime import heap
def rss():
    return int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE') / 2**20
blocks = [bytearray(64 * 1024) for _ in range(1500)]
for b in blocks:
    b[::4096] = b"x" * len(b[::4096])   # touch every page
kept = blocks[::10]
del blocks
before = rss()
released = heap.trim()
print(released, before, rss())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or heap.trim() is None, reason="glibc's malloc_trim only")
def test_trim_returns_freed_pages_between_live_blocks():
    out = subprocess.run([sys.executable, "-c", _FRAGMENTED], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    released, before, after = out.stdout.split()
    assert released == "True"
    # 1,350 freed blocks of 64 KiB are ~84 MiB; most of it goes back
    assert float(before) - float(after) > 50, out.stdout


def test_trim_says_what_it_did():
    assert heap.trim() in (True, False, None)


# In a fresh interpreter: one large block freed first (glibc then raises its mmap threshold past
# it), then 200 blocks of 900 KiB with a long-lived 4 KiB block after each, so that the large
# ones, if they come from the heap, cannot go back when freed; the resident set kept afterwards.
_LARGE_FREED = """
import os, sys
from adapters.runtime import heap
if sys.argv[1] == "configured":
    assert heap.configure() is True
def rss():
    return int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE') / 2**20
def touched(n):
    b = bytearray(n)
    b[::4096] = b"x" * len(b[::4096])
    return b
first = touched(2 << 20)
del first
before = rss()
large, small = [], []
for i in range(200):
    large.append(touched(900 * 1024))
    small.append(touched(4096 + i))
grown = rss() - before
del large
print(grown, rss() - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or heap._mallopt is None, reason="glibc's mallopt only")
def test_a_configured_heap_gives_freed_large_blocks_back_at_once():
    kept = {}
    for mode in ("configured", "default"):
        env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
        out = subprocess.run([sys.executable, "-c", _LARGE_FREED, mode], capture_output=True, text=True, check=True,
                             env={**env, "PYTHONPATH": os.getcwd()})
        grown, kept[mode] = map(float, out.stdout.split())
        assert grown > 150, out.stdout  # 200 x 900 KiB touched
    assert kept["configured"] < 20, kept
    assert kept["default"] > 100, kept  # what glibc's rising threshold keeps (why configure() exists)


def test_an_operators_threshold_is_left_alone(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    assert heap.configure() in (False, None)
