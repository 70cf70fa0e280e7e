"""The core's commands must not depend on the interpreter's hash seed: the replay re-executes
journals in other processes (Spark executors) and compares digests of the commands."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FLOW = r'''
from tests.core.builders import AT, broker, elected, run, tp
from controller_core import codec, events as E
from controller_core.values import ReplicaAssignment
commands = []
s, c = elected(brokers=(1, 2, 3, 4), topics={f"t{i}": [[1, 2, 3], [2, 3, 4], [3, 4, 1]] for i in range(25)})
commands += c
for event in (
    E.BrokersChanged(at=AT, brokers=(broker(2), broker(3), broker(4))),
    E.BrokersChanged(at=AT, brokers=(broker(1, 900), broker(2), broker(3), broker(4))),
    E.TopicsChanged(at=AT, topics=frozenset({f"t{i}" for i in range(25)} | {"u"}),
                    assignments=(("u", tuple((p, ReplicaAssignment((p % 4 + 1, (p + 1) % 4 + 1))) for p in range(8))),)),
    E.ReassignmentRequested(at=AT, exists=True, partitions=((tp("t3", 0), (4, 3, 2)),)),
    E.TopicDeletionsRequested(at=AT, topics=frozenset({"t7", "t8"})),
    E.ControlledShutdownRequested(at=AT, request_id=1, broker_id=2, broker_epoch=102),
):
    s, c = run(s, event)
    commands += c
print(codec.digest(commands))
'''


def test_commands_do_not_depend_on_the_hash_seed():
    digests = set()
    for seed in ("0", "1", "123"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", FLOW], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        digests.add(out.stdout.strip())
    assert len(digests) == 1, digests
