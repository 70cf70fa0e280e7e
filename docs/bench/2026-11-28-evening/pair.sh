#!/bin/bash
# full replay of the 1M journal, alternating: old = f63af24 (session start), new = /work/wt/new
J=/tmp/s37/gen1m
for who in "$@"; do
  dir=/work/wt/$who
  out=/tmp/s38/full-$who-$(date +%H%M%S)
  (cd $dir && KCTL_SPARK_MASTER='local[2]' PYTHONPATH=$dir /work/main/.venv/bin/python -m benchmarks.replay_throughput --journal $J --out $out/out --json $out.json > $out.log 2>&1)
  python3 -c "
import json,sys;d=json.load(open('$out.json'));s=d['stats']
print('$who', '$(date +%H:%M)', round(d['total_s'],1), {k:round(v,1) for k,v in s['stage_seconds'].items()}, {k:round(v,1) for k,v in s['stage_parts'].items()}, round(s['step_seconds'],1), round(s['fold_seconds'],1))"
  rm -rf $out
done
