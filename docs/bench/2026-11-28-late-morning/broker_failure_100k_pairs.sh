#!/bin/bash
# 100k broker failure, old (e229285, before the broker change) and new (be6b2cb+) alternating
for i in ${PAIRS:-1 2}; do
  for which in old new; do
    if [ $which = old ]; then dir=/work/wt/bench; else dir=/work/main; fi
    out=/tmp/s36/e2e100k-$which-$i
    rm -rf $out
    (cd $dir && PYTHONPATH=$dir /work/main/.venv/bin/python -m adapters.cli bench failover --partitions 100000 --runs 1 \
       --scenarios broker-failure --modes batched,zk-floor --no-client --no-unprepared --out $out > $out.log 2>&1)
    /work/main/.venv/bin/python - <<PY
import json
r = json.load(open("$out/result.json"))["scenarios"]["broker-failure"]
b = r["batched"]
print("$which $i", "batched", round(b["median_ms"]), "floor", round(r["zk-floor"]["median_ms"]), "brokers cpu", b["cpu"].get("brokers_ms"), "phases", {k: round(v) for k, v in b["phases_ms"].items()})
PY
  done
done
