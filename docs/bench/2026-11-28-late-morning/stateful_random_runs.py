"""The core's stateful Hypothesis test with random example sequences (the suite's run is
derandomized: one sequence per version of the test's source). Runs it N times, 200 examples
each, and stops at the first failure. From the repository's root:

    .venv/bin/python docs/bench/2026-11-28-late-morning/stateful_random_runs.py 20
"""
import sys
sys.path.insert(0, ".")
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from tests.core import test_stateful as T
for i in range(int(sys.argv[1])):
    try:
        run_state_machine_as_test(T.ControllerMachine, settings=settings(T.FAST, derandomize=False, max_examples=200))
        print("run", i, "ok", flush=True)
    except BaseException as exc:
        print("run", i, "FAILED", str(exc)[:3000], flush=True)
        break
