#!/bin/bash
# The failover benchmark alternating two checkouts of kctl, a pair at a time:
#   OLD=/path/to/old/checkout NEW=/path/to/new/checkout OUT=/tmp/pairs \
#     failover_pairs.sh PARTITIONS RUNS SCENARIOS "PAIR NUMBERS"
# The late morning's runs: `failover_pairs.sh 100000 1 broker-failure "1 2 3"` and
# `failover_pairs.sh 10000 3 broker-failure,controlled-shutdown "1 2"`, OLD at e229285 (a worktree),
# NEW the repository at be6b2cb and later. Prints each run's batched end, floor, brokers' CPU and
# broker round trip; each run's result.json is in $OUT.
set -e
partitions=$1 runs=$2 scenarios=$3 pairs=$4
py=${PYTHON:-$NEW/.venv/bin/python}
for i in $pairs; do
  for which in old new; do
    if [ $which = old ]; then dir=$OLD; else dir=$NEW; fi
    out=$OUT/$partitions-$which-$i
    rm -rf "$out"
    (cd "$dir" && PYTHONPATH=$dir $py -m adapters.cli bench failover --partitions "$partitions" --runs "$runs" \
       --scenarios "$scenarios" --modes batched,zk-floor --no-client --no-unprepared --out "$out" > "$out.log" 2>&1)
    $py - "$out/result.json" "$which $i" <<'PY'
import json, sys
for scenario, r in json.load(open(sys.argv[1]))["scenarios"].items():
    b = r["batched"]
    print(sys.argv[2], scenario, "batched", round(b["median_ms"]), [round(x) for x in b["samples_ms"]],
          "floor", round(r["zk-floor"]["min_ms"]), "brokers cpu", b["cpu"].get("brokers_ms"),
          "broker_round_trip", round(b["phases_ms"]["broker_round_trip"]))
PY
  done
done
