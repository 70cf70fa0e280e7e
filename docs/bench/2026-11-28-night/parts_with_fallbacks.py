"""`benchmarks.replay_parts` that also counts the events whose fast digest differed from the
journal's and was then checked against the definition (`codec.reference_digest`, replay/fold.py):
a verdict of PASS with none means the fast digest gave every recorded digest itself.

    PYTHONHASHSEED=0 python docs/bench/2026-11-28-night/parts_with_fallbacks.py --journal J --by-type
"""
import sys

from benchmarks import replay_parts
from replay import fold

calls = [0]
real = fold.codec.reference_digest


def counted(commands):
    calls[0] += 1
    return real(commands)


fold.codec.reference_digest = counted
code = replay_parts.main(sys.argv[1:])
print(f"events whose digest was checked against the definition after the fast digest differed: {calls[0]}")
sys.exit(code)
