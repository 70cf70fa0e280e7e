import sys
from benchmarks.sampled_units import sampled_units
from replay.records import verify_line
from controller_core import codec, columns
def err(m): raise ValueError(m)
n = 0
for node in range(3):
    for u in sampled_units(sys.argv[1], 30, seed=2, node=node):
        rec = u.head if isinstance(u.head, dict) else verify_line(u.head)
        d = rec["body"]["state"]["partitions"]
        if not isinstance(d, dict) or not d["tps"]: continue
        fast = columns._decoded_columns(d); slow = columns._decode_partitions(d, err)
        assert fast is not None
        assert fast == slow and dict(fast.items()) == dict(slow.items()) and fast.width == slow.width, u.unit
        assert codec.canonical_json(columns.encode_columns(fast)) == codec.canonical_json(columns.encode_columns(slow))
        for name in columns.Chunk._fields:
            assert (fast.column(name) == slow.column(name)).all(), name
        n += 1
print("equal heads:", n)
