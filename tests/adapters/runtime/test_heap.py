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
