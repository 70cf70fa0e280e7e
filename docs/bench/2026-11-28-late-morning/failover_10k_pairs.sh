#!/bin/bash
# 100k broker failure, old (e229285, before the broker change) and new (be6b2cb+) alternating
for i in ${PAIRS:-1 2}; do
  for which in old new; do
    if [ $which = old ]; then dir=/work/wt/bench; else dir=/work/main; fi
    out=/tmp/s36/e2e10k-$which-$i
    rm -rf $out
    (cd $dir && PYTHONPATH=$dir /work/main/.venv/bin/python -m adapters.cli bench failover --partitions 10000 --runs 3 \
       --scenarios broker-failure,controlled-shutdown --modes batched,zk-floor --no-client --no-unprepared --out $out > $out.log 2>&1)
    /work/main/.venv/bin/python - <<PY
import json
res = json.load(open("$out/result.json"))["scenarios"]
for sc, r in res.items():
    b = r["batched"]
    print("$which $i", sc, "batched", round(b["median_ms"]), [round(x) for x in b["samples_ms"]], "floor", round(r["zk-floor"]["min_ms"]), "brokers cpu", b["cpu"].get("brokers_ms"), "broker_round_trip", round(b["phases_ms"]["broker_round_trip"]))
PY
  done
done
