#!/bin/bash
# The whole replay job on the million-event journal, alternating the session's start (be4146b,
# /work/wt/old) and its end (/work/wt/new): python -m benchmarks.replay_throughput on local[2].
J=${J:-/tmp/s37/gen1m}
here=$(cd "$(dirname "$0")" && pwd)
for who in "$@"; do
  dir=/work/wt/$who
  out=/tmp/s39/full-$who-$(date +%H%M%S)
  (cd $dir && KCTL_SPARK_MASTER='local[2]' PYTHONPATH=$dir /work/main/.venv/bin/python -m benchmarks.replay_throughput \
     --journal $J --out $out/out --json $out.json > $out.log 2>&1)
  cp $out.json $here/replay-full-$who-$(basename $out).json
  python3 -c "
import json;d=json.load(open('$out.json'));s=d['stats']
print('$who', '$(date +%H:%M)', 'total', round(d['total_s'],1), 'step+digest', round(s['step_seconds'],1), 'fold', round(s['fold_seconds'],1), 're-execution/core', round(s['events']/s['step_seconds']), 'fold/core', round(s['events']/s['task_seconds']))" | tee -a $here/replay-pairs.txt
  grep 'audit verdict' $out.log | tee -a $here/replay-pairs.txt
  rm -rf $out
done
